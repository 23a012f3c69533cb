import { type AliasedRawBuilder, sql } from 'kysely';
import pg from 'pg';

/** pg's own timestamptz parser, for every text the fast path below does not take. */
const general = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text') as (text: string) => Date | number | null;

const ZERO = 48;
const MS_PER_DAY = 86_400_000;

/** The two-digit number at text[at], or -1 when either character is not a digit (or is past the end). */
function two(text: string, at: number): number {
  const tens = text.charCodeAt(at) - ZERO;
  const ones = text.charCodeAt(at + 1) - ZERO;
  return tens >= 0 && tens <= 9 && ones >= 0 && ones <= 9 ? tens * 10 + ones : -1;
}

/** Days from 1970-01-01 to a date of the proleptic Gregorian calendar (year ≥ 1, month 1-12), as Date.UTC counts them. */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

/**
 * Parses Postgres's text form of a timestamptz as the server sends it with the ISO date style
 * (`2026-11-26 11:49:40.123456+00`, offsets `+05:30` or `-03:00:12`) to the same Date as pg's
 * parser, reading fixed positions and counting the days itself (no Date.UTC): every listed record
 * carries two or three timestamps, read on every list request. Any other form (years before 1000
 * or after 9999, BC, infinity, a month or day out of range) goes to pg's parser.
 */
export function parseTimestamptz(text: string): Date | number | null {
  const n = text.length;
  if (n < 22 || text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45 || text.charCodeAt(10) !== 32 || text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58) {
    return general(text);
  }
  const century = two(text, 0);
  const yearOfCentury = two(text, 2);
  const month = two(text, 5);
  const day = two(text, 8);
  const hour = two(text, 11);
  const minute = two(text, 14);
  const second = two(text, 17);
  if (century < 10 || yearOfCentury < 0 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || minute < 0 || second < 0) {
    return general(text);
  }
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
  const hours = two(text, i + 1);
  if (sign === 0 || hours < 0) return general(text);
  let offset = hours * 3600;
  i += 3;
  if (i < n) {
    const minutes = text.charCodeAt(i) === 58 ? two(text, i + 1) : -1;
    if (minutes < 0) return general(text);
    offset += minutes * 60;
    i += 3;
    if (i < n) {
      const seconds = text.charCodeAt(i) === 58 ? two(text, i + 1) : -1;
      if (seconds < 0) return general(text);
      offset += seconds;
      i += 3;
    }
  }
  if (i !== n) return general(text);
  const days = daysFromCivil(century * 100 + yearOfCentury, month, day);
  return new Date(days * MS_PER_DAY + ((hour * 60 + minute) * 60 + second - sign * offset) * 1000 + ms);
}

/** A column's name without its table (`created_at` of `d.created_at`), as Postgres names the value. */
type Unqualified<C extends string> = C extends `${string}.${infer Name}` ? Name : C;

const unqualified = <C extends string>(column: C) => column.slice(column.lastIndexOf('.') + 1) as Unqualified<C>;

/**
 * A timestamptz column read as epoch milliseconds computed by Postgres, the form the API gives times
 * in: a list reads two or more for each record, and so neither parses their text nor builds a Date
 * for each. The value is the one `millis` gives for the Date pg parses (milliseconds, the
 * microseconds dropped).
 */
export function epochMs<C extends string>(column: C): AliasedRawBuilder<number, Unqualified<C>> {
  return sql<number>`floor(extract(epoch from ${sql.ref(column)}) * 1000)::int8`.as(unqualified(column));
}

/** epochMs of a nullable column. */
export const epochMsOrNull = <C extends string>(column: C) => epochMs(column) as unknown as AliasedRawBuilder<number | null, Unqualified<C>>;

/** A row as a presenter takes it: each timestamp a Date (a record read alone) or epoch milliseconds (a listed one, see epochMs). */
export type Instants<R> = { [K in keyof R]: Date extends R[K] ? R[K] | number : R[K] };

/** A timestamp as the API gives it: epoch milliseconds. */
export function millis(value: Date | number): number {
  return typeof value === 'number' ? value : value.getTime();
}

export const millisOrNull = (value: Date | number | null): number | null => (value === null ? null : millis(value));
