import pg from 'pg';

/** pg's own timestamptz parser, for every text the fast path below does not take. */
const general = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text') as (text: string) => Date | number | null;

const ZERO = 48;

/** The decimal number in text[from, to), or -1 when a character there is not a digit. */
function digits(text: string, from: number, to: number): number {
  let value = 0;
  for (let i = from; i < to; i += 1) {
    const d = text.charCodeAt(i) - ZERO;
    if (!(d >= 0 && d <= 9)) return -1; // also past the end (NaN)
    value = value * 10 + d;
  }
  return value;
}

/**
 * Parses Postgres's text form of a timestamptz as the server sends it with the ISO date style
 * (`2026-11-26 11:49:40.123456+00`, offsets `+05:30` or `-03:00:12`) to the same Date as pg's
 * parser, about five times faster: every listed record carries two or three timestamps, so their
 * parsing was a tenth of a list request's time. Any other form (years before 1000 or after 9999,
 * BC, infinity) goes to pg's parser.
 */
export function parseTimestamptz(text: string): Date | number | null {
  const n = text.length;
  if (n < 22 || text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45 || text.charCodeAt(10) !== 32 || text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58) {
    return general(text);
  }
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 7);
  const day = digits(text, 8, 10);
  const hour = digits(text, 11, 13);
  const minute = digits(text, 14, 16);
  const second = digits(text, 17, 19);
  if (year < 1000 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0) return general(text);
  let i = 19;
  let ms = 0;
  if (text.charCodeAt(i) === 46) {
    // The fraction's first three digits are the milliseconds; the rest (microseconds) are dropped, as pg does.
    i += 1;
    for (let scale = 100; i < n; i += 1, scale /= 10) {
      const d = text.charCodeAt(i) - ZERO;
      if (d < 0 || d > 9) break;
      if (scale >= 1) ms += d * scale;
    }
  }
  const sign = text.charCodeAt(i) === 43 ? 1 : text.charCodeAt(i) === 45 ? -1 : 0;
  const hours = digits(text, i + 1, i + 3);
  if (sign === 0 || hours < 0) return general(text);
  let offset = hours * 3600;
  i += 3;
  for (const unit of [60, 1]) {
    if (i === n) break;
    const part = text.charCodeAt(i) === 58 ? digits(text, i + 1, i + 3) : -1;
    if (part < 0) return general(text);
    offset += part * unit;
    i += 3;
  }
  if (i !== n) return general(text);
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second, ms) - sign * offset * 1000);
}
