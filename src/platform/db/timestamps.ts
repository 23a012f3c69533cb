import { type AliasedRawBuilder, sql } from 'kysely';

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
export const epochMsOrNull = <C extends string>(column: C) =>
  epochMs(column) as unknown as AliasedRawBuilder<number | null, Unqualified<C>>;

/** A row as a presenter takes it: each timestamp a Date (a record read alone) or epoch milliseconds (a listed one, see epochMs). */
export type Instants<R> = { [K in keyof R]: Date extends R[K] ? R[K] | number : R[K] };

/** A timestamp as the API gives it: epoch milliseconds. */
export function millis(value: Date | number): number {
  return typeof value === 'number' ? value : value.getTime();
}

export const millisOrNull = (value: Date | number | null): number | null => (value === null ? null : millis(value));
