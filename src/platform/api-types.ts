import type { components, operations } from '../../generated/api';

/** The named schemas of the API document (generated/api.ts). */
export type Schemas = components['schemas'];

/**
 * A request body as a service takes it: without the compatibility fields every body accepts,
 * `userId` (the handler checks it against the caller) and `accessToken` (ignored).
 */
export type RequestInput<Name extends keyof Schemas> = Omit<Schemas[Name], 'userId' | 'accessToken'>;

/** The query parameters of an operation, by operationId. */
export type QueryOf<Operation extends keyof operations> = NonNullable<operations[Operation]['parameters']['query']>;
