/**
 * One way to read settings from the environment: each piece states its variables as one zod schema
 * built from the helpers below, and `readEnv` parses it, reporting every bad variable at once by name.
 *
 * Unit convention: a duration's name ends in its unit. Bounds, timeouts and intervals are `_MS`;
 * `_SECONDS` only where the number is handed on in seconds (a `Retry-After` header, a Kubernetes
 * `*Seconds` field, JWT times). Sizes are `_BYTES`. A renamed variable keeps working through `renamed`
 * for at least one release, with a warning and a deprecation note in the piece's doc.
 */
import { z } from 'zod';

/** A non-negative integer (by default), e.g. a bound in ms or a size in bytes. */
export const int = (def: number, bounds: { min?: number; max?: number } = {}) => {
  let s = z.coerce
    .number()
    .int()
    .min(bounds.min ?? 0);
  if (bounds.max !== undefined) s = s.max(bounds.max);
  return s.default(def);
};

export const port = (def: number) => int(def, { max: 65_535 });

/** `true`/`false`/`1`/`0`. */
export const bool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1');

export const text = (def: string) => z.string().min(1).default(def);

/** Unset and empty are both "not set". */
export const optionalText = () =>
  z
    .string()
    .optional()
    .transform((v) => (v === '' ? undefined : v));

export const logLevel = () =>
  z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info');

/** Settings every process reads. */
export const commonEnv = {
  APPHOST_LOG_LEVEL: logLevel(),
  APPHOST_OPS_PORT: port(9090),
};

/** An old variable name and what it became; `scale` converts its value (e.g. 1000 for seconds → ms). */
export interface Renamed {
  name: string;
  scale?: number;
}

export class SettingsError extends Error {
  override readonly name = 'SettingsError';
  readonly problems: ReadonlyArray<{ variable: string; message: string }>;
  constructor(piece: string, problems: ReadonlyArray<{ variable: string; message: string }>) {
    super(`invalid ${piece} settings: ${problems.map((p) => `${p.variable}: ${p.message}`).join('; ')}`);
    this.problems = problems;
  }
}

/**
 * Parses `env` with `schema`. Every problem is reported in one SettingsError naming its variable and
 * the value it had (never for secrets: names containing KEY, SECRET, TOKEN or PASSWORD).
 */
export function readEnv<S extends z.ZodType>(
  piece: string,
  schema: S,
  env: NodeJS.ProcessEnv,
  renamed: Readonly<Record<string, Renamed>> = {},
): z.output<S> {
  const input: NodeJS.ProcessEnv = { ...env };
  for (const [old, to] of Object.entries(renamed)) {
    const value = env[old];
    if (value === undefined || env[to.name] !== undefined) continue;
    const n = Number(value);
    input[to.name] = to.scale && value.trim() !== '' && Number.isFinite(n) ? String(n * to.scale) : value;
  }
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const problems = r.error.issues.map((i) => {
    const variable = i.path.length > 0 ? i.path.map(String).join('.') : '(environment)';
    const value = input[variable];
    const secret = /KEY|SECRET|TOKEN|PASSWORD/.test(variable);
    const shown = value === undefined ? 'unset' : secret ? 'set' : `'${value}'`;
    return { variable, message: `${i.message} (${shown})` };
  });
  throw new SettingsError(piece, problems);
}

/** One warning per old name still in use, for main.ts to log once the logger exists. */
export function deprecatedSettings(
  env: NodeJS.ProcessEnv,
  renamed: Readonly<Record<string, Renamed>>,
): string[] {
  return Object.entries(renamed)
    .filter(([old]) => env[old] !== undefined)
    .map(([old, to]) =>
      env[to.name] !== undefined
        ? `${old} is deprecated and ignored because ${to.name} is set`
        : `${old} is deprecated: use ${to.name}${to.scale ? ` (×${to.scale})` : ''}`,
    );
}
