import type { FakeModelServer, FakeRequestBody } from '../test/helpers/openai-server';

/** A model server's chunk with content (a role chunk has empty content). */
export const MODEL_CONTENT = /"content":"[^"]/;

/** Reads a response body to its end; the milliseconds (from `started`) at which `first` first matched the text so far, and at the end. */
export async function timed(res: Response, started: number, first: RegExp): Promise<{ firstMs: number; endMs: number; text: string }> {
  let text = '';
  let firstMs = Number.NaN;
  const decoder = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    text += decoder.decode(chunk, { stream: true });
    if (Number.isNaN(firstMs) && first.test(text)) firstMs = performance.now() - started;
  }
  return { firstMs, endMs: performance.now() - started, text };
}

/** A request the service made, sent to the model server directly: its first content and its end, in milliseconds. */
export async function direct(fake: FakeModelServer, body: FakeRequestBody): Promise<{ firstMs: number; endMs: number }> {
  const started = performance.now();
  const res = await fetch(`${fake.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer bench' },
    body: JSON.stringify(body),
  });
  const out = await timed(res, started, MODEL_CONTENT);
  if (res.status !== 200 || !out.text.includes('[DONE]'))
    throw new Error(`the model server answered ${res.status}: ${out.text.slice(0, 300)}`);
  return out;
}
