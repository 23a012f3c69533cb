import { sql } from 'kysely';

/**
 * The words of a query, any of which may match (ranked by how many and how close): questions in
 * plain language rarely contain every word of the passage that answers them.
 */
export const anyWord = (query: string) =>
  sql`coalesce(nullif(replace(plainto_tsquery('english', ${query})::text, '&', '|'), ''), '')::tsquery`;
