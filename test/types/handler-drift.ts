// Compile-time checks, run by `tsc --noEmit` (make typecheck): each @ts-expect-error must stay an error,
// so a handler that drifts from the document, or a handler map that misses an operation, fails the build.
import type { Handler, HandlerMap } from '../../src/http/handler';

// @ts-expect-error a 200 body that is not the document's shape does not compile
export const drifted: Handler<'createNote'> = async () => ({ note: { noteId: 1 } });

// @ts-expect-error a 200 body that misses a required field does not compile
export const incomplete: Handler<'getCapabilities'> = async () => ({ capabilities: { automations: true } });

// @ts-expect-error a handler map without every operation does not compile
export const missing: HandlerMap = {
  getCapabilities: async () => ({
    capabilities: {
      automations: true,
      billing: false,
      vectorSearch: true,
      byok: true,
      mcp: true,
      integrations: true,
      openaiApi: true,
      mcpServer: true,
      billingProvider: 'none',
    },
  }),
};
