import type { HandlerMap } from '../../http/handler';
import { presentKnowledgeResult } from './presenter';
import type { KnowledgeService } from './service';

export function knowledgeHandlers(knowledge: KnowledgeService): Pick<HandlerMap, 'searchKnowledge'> {
  return {
    searchKnowledge: async ({ caller, body }) => {
      const { retrieval, hits, note } = await knowledge.search(caller.userId, body);
      return {
        results: hits.map(({ hit, score }) => presentKnowledgeResult(hit, score)),
        retrieval,
        ...(note ? { retrievalNote: note.slice(0, 1000) } : {}),
      };
    },
  };
}
