import { sendContent } from '../../http/content';
import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentOutput } from './presenter';
import type { OutputService } from './service';

export function outputHandlers(outputs: OutputService): Pick<HandlerMap, 'getOutputs' | 'getOutputContent' | 'deleteOutput'> {
  return {
    getOutputs: async ({ caller, query }) => {
      if (query.outputId !== undefined) return { output: presentOutput(await outputs.get(caller.userId, query.outputId)) };
      const filter = {
        type: query.type,
        origin: query.origin,
        conversationId: query.conversationId,
        automationId: query.automationId,
        projectId: query.projectId,
        generationId: query.generationId,
      };
      const page = await outputs.list(caller.userId, filter, readPage(query));
      return { outputs: page.items.map(presentOutput), nextCursor: page.nextCursor };
    },
    getOutputContent: async ({ caller, params, req, res }) => {
      const output = await outputs.get(caller.userId, params.outputId);
      return sendContent(req, res, {
        name: output.name,
        mimeType: output.mime_type,
        size: output.size_bytes,
        sha256: output.sha256,
        open: (range) => outputs.openObject(output.storage_key, range),
      });
    },
    deleteOutput: async ({ caller, query, body }) => {
      const outputId = idFromQueryOrBody('outputId', query, body);
      await outputs.delete(caller.userId, outputId);
      return { outputId, deleted: true };
    },
  };
}
