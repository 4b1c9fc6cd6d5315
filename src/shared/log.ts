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

const LEVEL_METHODS: ReadonlySet<PropertyKey> = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);
const noop = () => undefined;

/**
 * `parent.child(bindings)`, made only when something is logged at an enabled level: a pino child
 * serialises and redacts its bindings when it is made (~2% of the run worker's CPU per run, which logs
 * nothing below `info` unless a run goes wrong, and nothing at all at `warn`).
 */
export function lazyChild(parent: Logger, bindings: Record<string, unknown>): Logger {
  let child: Logger | undefined;
  return new Proxy(parent, {
    get(_target, prop) {
      if (!child && LEVEL_METHODS.has(prop) && !parent.isLevelEnabled(prop as string)) return noop;
      child ??= parent.child(bindings);
      const value: unknown = Reflect.get(child, prop, child);
      return typeof value === 'function' ? value.bind(child) : value;
    },
  });
}
