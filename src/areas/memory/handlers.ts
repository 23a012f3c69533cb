import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentMemoryItem } from './presenter';
import type { MemoryService } from './service';

export function memoryHandlers(memory: MemoryService): Pick<HandlerMap, 'getMemory' | 'createMemory' | 'updateMemory' | 'deleteMemory'> {
  return {
    getMemory: async ({ caller, query }) => {
      if (query.memoryId !== undefined) {
        return { memoryItem: presentMemoryItem(await memory.get(caller.userId, query.memoryId)) };
      }
      const page = await memory.list(caller.userId, { kind: query.kind, projectId: query.projectId }, readPage(query));
      return { memoryItems: page.items.map(presentMemoryItem), nextCursor: page.nextCursor };
    },
    createMemory: async ({ caller, body }) => {
      const { item, created } = await memory.create(caller.userId, body);
      return { memoryItem: presentMemoryItem(item), created };
    },
    updateMemory: async ({ caller, body }) => ({
      memoryItem: presentMemoryItem(await memory.update(caller.userId, body)),
    }),
    deleteMemory: async ({ caller, query, body }) => {
      const memoryId = idFromQueryOrBody('memoryId', query, body);
      await memory.delete(caller.userId, memoryId);
      return { memoryId, deleted: true };
    },
  };
}
