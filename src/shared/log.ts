import { type Logger, type LoggerOptions, pino } from 'pino';

export type { Logger };

/** Paths pino blanks out wherever they appear: credentials and webhook secrets never reach a log. */
export const REDACT_PATHS = [
  'authorization',
  'token',
  'secret',
  'webhookSecret',
  'password',
  '*.authorization',
  '*.token',
  '*.secret',
  '*.webhookSecret',
  'headers.authorization',
  'headers["x-webhook-secret"]',
  'req.headers.authorization',
  'req.headers["x-webhook-secret"]',
  '*.headers.authorization',
  '*.headers["x-webhook-secret"]',
];

export function createLogger(opts: {
  name: string;
  level?: string;
  destination?: NodeJS.WritableStream;
}): Logger {
  const options: LoggerOptions = {
    name: opts.name,
    level: opts.level ?? 'info',
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { service: opts.name },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return opts.destination ? pino(options, opts.destination as pino.DestinationStream) : pino(options);
}

/** A logger that writes nothing, for unit tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
