import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { resolveRef, type Components } from '../../src/http/document-refs';
import { loadApiDocument, METHODS } from '../../src/http/openapi';

// What generators need of the bundle: a concrete type for every body, and a JSON answer and an
// event stream never in one response (a generated call could not know which it gets).
const doc = loadApiDocument();
const components = (doc.components ?? {}) as Components;

interface Body {
  where: string;
  types: string[];
}

function bodies(): { requests: Body[]; responses: Body[] } {
  const requests: Body[] = [];
  const responses: Body[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const operation = (item as Record<string, OpenAPIV3.OperationObject | undefined>)[method];
      if (!operation) continue;
      const where = `${method.toUpperCase()} ${path}`;
      if (operation.requestBody) {
        const body = resolveRef<OpenAPIV3.RequestBodyObject>(components, operation.requestBody);
        requests.push({ where, types: Object.keys(body.content ?? {}) });
      }
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        const resolved = resolveRef<OpenAPIV3.ResponseObject>(components, response);
        responses.push({ where: `${where} ${status}`, types: Object.keys(resolved.content ?? {}) });
      }
    }
  }
  return { requests, responses };
}

describe('the media types of the bundled document', () => {
  const { requests, responses } = bodies();

  test('no request or response body has a wildcard media type', () => {
    const wildcards = [...requests, ...responses].flatMap(({ where, types }) =>
      types.filter((type) => type.includes('*')).map((type) => `${where} ${type}`),
    );
    expect(wildcards).toEqual([]);
    expect(requests.length).toBeGreaterThan(50);
    expect(responses.length).toBeGreaterThan(500);
  });

  test('no response holds both JSON and an event stream (but OpenAI’s chat completions, as OpenAI’s own API)', () => {
    const mixed = responses.filter(({ types }) => types.includes('text/event-stream') && types.some((type) => /json/.test(type)));
    // OpenAI's clients call one operation for both, and read the stream by the request's `stream`.
    expect(mixed.map(({ where }) => where)).toEqual(['POST /v1/chat/completions 200']);
    // The stream has an operation of its own.
    expect(responses.filter(({ types }) => types.includes('text/event-stream')).map(({ where }) => where)).toEqual([
      'GET /api/v1/conversations/messages/stream 200',
      'POST /api/v1/conversations/messages/stream 200',
      'POST /api/v1/conversations/messages/regenerate/stream 200',
      'POST /v1/chat/completions 200',
    ]);
  });

  test('the upload takes application/octet-stream, the content answers are bytes', () => {
    expect(requests.find(({ where }) => where === 'PUT /api/v1/files/{fileId}/upload')?.types).toEqual(['application/octet-stream']);
    for (const where of ['GET /api/v1/files/{fileId}/content', 'GET /api/v1/outputs/{outputId}/content']) {
      for (const status of ['200', '206']) {
        expect(responses.find((body) => body.where === `${where} ${status}`)?.types).toEqual(['application/octet-stream']);
      }
    }
  });
});
