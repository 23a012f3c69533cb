import fc from 'fast-check';
import { serializerFor, uncompiledOperations } from '../../src/http/json-writer';
import { loadApiDocument } from '../../src/http/openapi';
import { resolver, type Schema, valueFor } from '../fuzz/schema-arbitrary';

const doc = loadApiDocument() as unknown as {
  paths: Record<string, Record<string, { operationId?: string; responses?: Record<string, { content?: Record<string, { schema?: Schema }> }> }>>;
  components: { schemas: Record<string, Schema> };
};
const resolve = resolver(doc);

/** Each list operation (a 200 that may be a page with `nextCursor`) and the schema of its page. */
function listOperations(): Array<[string, Schema]> {
  const found: Array<[string, Schema]> = [];
  for (const item of Object.values(doc.paths)) {
    for (const operation of Object.values(item)) {
      const schema = operation.responses?.['200']?.content?.['application/json']?.schema;
      if (!operation.operationId || !schema) continue;
      const top = resolve(schema);
      const page = [top, ...(top.oneOf ?? [])].map(resolve).find((s) => s.properties?.nextCursor !== undefined);
      if (page) found.push([operation.operationId, page]);
    }
  }
  return found;
}

describe("the writer of the operations' 200 bodies", () => {
  test('compiles a serializer from the schema of every operation (none falls back to JSON.stringify)', () => {
    expect(uncompiledOperations()).toEqual([]);
  });

  test('finds every list route of the document', () => {
    expect(listOperations().map(([operationId]) => operationId).sort()).toEqual([
      'getAdminUsage', 'getAgentCommands', 'getAgentEnvironments', 'getApprovals', 'getAutomationRuns', 'getAutomations', 'getConversations',
      'getFiles', 'getMcpServers', 'getMemory', 'getMessages', 'getModelProviders', 'getNotes', 'getOutputs', 'getProjects', 'getSkills', 'getWebhookDeliveries', 'getWebhooks',
    ]);
  });

  test.each(listOperations())('writes any page of %s as JSON.stringify writes it', (operationId, page) => {
    const write = serializerFor(operationId);
    fc.assert(
      fc.property(valueFor(page, resolve, 0, []), (body) => {
        let written: string;
        try {
          written = write(body);
        } catch (error) {
          // The generator approximates some constraints: a value no branch of a oneOf accepts is not a body the service sends.
          fc.pre(!/does not match schema definition/.test((error as Error).message));
          throw error;
        }
        expect(written).toBe(JSON.stringify(body));
      }),
      { numRuns: 200 },
    );
  });
});
