/** Form fields → values or a message per field (zod, the same rules as the JSON API's bodies). */
import type { z } from 'zod';

export type FieldErrors = Record<string, string>;

export function checkForm<T>(
  schema: z.ZodType<T>,
  input: Record<string, unknown>,
): { ok: true; value: T } | { ok: false; errors: FieldErrors } {
  const r = schema.safeParse(input);
  if (r.success) return { ok: true, value: r.data };
  const errors: FieldErrors = {};
  for (const issue of r.error.issues) {
    const field = String(issue.path[0] ?? 'form');
    errors[field] ??= issue.message;
  }
  return { ok: false, errors };
}
