import { z } from 'zod';

/**
 * The type of a variable: a zod schema from the variable's text (trimmed, never blank) to its
 * value, with the accepted values as its description (docs/configuration.md shows it). A problem's
 * message is the reason only; the loader puts the variable's name before it.
 */
export type Kind<T> = z.ZodType<T, string>;

const quoted = (input: unknown) => `(got "${String(input)}")`;

/** A whole number from min to max. */
export function int(min: number, max: number): Kind<number> {
  return z
    .string()
    .refine((v) => /^\d+$/.test(v) && Number(v) >= min && Number(v) <= max, {
      error: (issue) => `must be a whole number from ${min} to ${max} ${quoted(issue.input)}`,
    })
    .transform(Number)
    .describe(max === Number.MAX_SAFE_INTEGER ? `integer ≥ ${min}` : `integer ${min}–${max}`);
}

/** A whole number from min to max in one unit, as a number of another (minutes to milliseconds: factor 60 000). */
export function scaled(min: number, max: number, factor: number): Kind<number> {
  const kind = int(min, max);
  return kind.transform((value) => value * factor).describe(kind.description as string);
}

/** true/false, 1/0, yes/no or on/off, in any case. */
export function bool(): Kind<boolean> {
  return z
    .stringbool({
      truthy: ['1', 'true', 'yes', 'on'],
      falsy: ['0', 'false', 'no', 'off'],
      case: 'insensitive',
      error: (issue) => `must be true or false ${quoted(String(issue.input).toLowerCase())}`,
    })
    .describe('`true` or `false`');
}

/** One of the listed words. */
export function oneOf<const T extends readonly [string, ...string[]]>(values: T): Kind<T[number]> {
  return z
    .enum(values, { error: (issue) => `must be one of ${values.join(', ')} ${quoted(issue.input)}` })
    .describe(values.map((v) => `\`${v}\``).join(', '));
}

/** Any text; with a minimum length (a secret), checked without quoting it. */
export function text(options: { min?: number } = {}): Kind<string> {
  const base = z.string();
  if (options.min === undefined) return base.describe('text');
  return base.min(options.min, `must be at least ${options.min} characters`).describe(`text of ≥ ${options.min} characters`);
}

/** A string matching a pattern, such as an ISO 4217 code. */
export function matching(pattern: RegExp, reason: string, accepts: string): Kind<string> {
  return z
    .string()
    .refine((v) => pattern.test(v), { error: (issue) => `${reason} ${quoted(issue.input)}` })
    .describe(accepts);
}

function isUrl(value: string, protocols: readonly string[]): boolean {
  try {
    return protocols.includes(new URL(value).protocol);
  } catch {
    return false;
  }
}

/** An absolute URL of one of the protocols (`https:`…). */
export function url(protocols: readonly string[]): Kind<string> {
  return z
    .string()
    .refine((v) => isUrl(v, protocols), { error: `must be a ${protocols.join(' or ')} URL`, abort: true })
    .describe(`${protocols.map((p) => p.slice(0, -1)).join(' or ')} URL`);
}

const SIZE = /^(\d+)\s*(b|kb|mb|gb)?$/i;

/** Bytes of a size such as 512kb or 5gb; null when it is not one. */
export function sizeInBytes(value: string): number | null {
  const match = SIZE.exec(value);
  if (!match) return null;
  const factor = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }[(match[2] ?? 'b').toLowerCase()] ?? 1;
  return Number(match[1]) * factor;
}

/** A size in bytes, written 1048576, 512kb, 1mb or 5gb. */
export function size(): Kind<number> {
  return z
    .string()
    .refine((v) => sizeInBytes(v) !== null, { error: (issue) => `must be a size such as 1mb, 512kb or 5gb ${quoted(issue.input)}` })
    .transform((v) => sizeInBytes(v) as number)
    .describe('size: `512kb`, `1mb`, `5gb`');
}

const DURATION = /^(\d+)(ms|s|m|h|d)$/;
const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration such as 500ms, 5s, 5m, 2h or 5d, in milliseconds (null when it is not one). */
export function parseDuration(value: string): number | null {
  const match = DURATION.exec(value.trim());
  return match ? Number(match[1]) * (DURATION_UNITS[match[2] as string] as number) : null;
}

/** A duration in milliseconds, written 500ms, 30s, 5m, 2h or 5d; optionally within bounds, with the reason when not. */
export function duration(bounds?: { min: number; max?: number; reason: string }): Kind<number> {
  return z
    .string()
    .refine((v) => parseDuration(v) !== null, { error: (issue) => `must be a duration such as 30s, 12h or 5d ${quoted(issue.input)}` })
    .transform((v) => parseDuration(v) as number)
    .refine((ms) => bounds === undefined || (ms >= bounds.min && ms <= (bounds.max ?? Infinity)), bounds?.reason)
    .describe('duration: `500ms`, `30s`, `5m`, `2h`, `5d`');
}

/** A comma-separated list of at most `max` durations, in milliseconds. */
export function durations(max: number): Kind<number[]> {
  return z
    .string()
    .refine((v) => v.split(',').every((d) => parseDuration(d) !== null) && v.split(',').length <= max, {
      error: (issue) => `must be a comma-separated list of at most ${max} durations such as 5s,5m,2h ${quoted(issue.input)}`,
    })
    .transform((v) => v.split(',').map((d) => parseDuration(d) as number))
    .describe(`up to ${max} durations, comma-separated`);
}

/** The entries of a comma-separated list, trimmed, without empty ones. */
export function entries(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

/** A comma-separated list, each entry of the given kind (each entry at fault is a problem of its own). */
export function list<T = string>(entry?: z.ZodType<T, string>, accepts = 'comma-separated list'): Kind<T[]> {
  return z
    .string()
    .transform(entries)
    .pipe(z.array(entry ?? (z.string() as z.ZodType<unknown, string> as z.ZodType<T, string>)))
    .describe(accepts);
}

/**
 * An entry of a list that must match a pattern (or pass a test); the reason says what an entry is,
 * and the entry is quoted after it (a function gives the whole message instead).
 */
export function entry(
  test: RegExp | ((value: string) => boolean),
  reason: string | ((value: string) => string),
): z.ZodType<string, string> {
  const passes = typeof test === 'function' ? test : (value: string) => test.test(value);
  const message = typeof reason === 'function' ? reason : (value: string) => `${reason} ${quoted(value)}`;
  return z.string().refine(passes, { error: (issue) => message(String(issue.input)) });
}

/** A value read by hand (a JSON document, a key list): `parse` reports each problem and returns the value. */
export function parsed<T>(accepts: string, parse: (value: string, problem: (message: string) => void) => T): Kind<T> {
  return z
    .string()
    .transform((value, ctx) => {
      let failed = false;
      const result = parse(value, (message) => {
        failed = true;
        ctx.addIssue({ code: 'custom', message, input: value });
      });
      return failed ? z.NEVER : result;
    })
    .describe(accepts);
}
