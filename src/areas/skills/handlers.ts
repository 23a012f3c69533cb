import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentSkill } from './presenter';
import type { SkillService } from './service';

export function skillHandlers(skills: SkillService): Pick<HandlerMap, 'getSkills' | 'createSkill' | 'updateSkill' | 'deleteSkill'> {
  return {
    getSkills: async ({ caller, query }) => {
      if (query.skillId !== undefined) return { skill: presentSkill(await skills.get(caller.userId, query.skillId)) };
      const filter = { projectId: query.projectId, enabled: query.enabled };
      const page = await skills.list(caller.userId, filter, readPage(query));
      return { skills: page.items.map(presentSkill), nextCursor: page.nextCursor };
    },
    createSkill: async ({ caller, body }) => ({ skill: presentSkill(await skills.create(caller.userId, body)) }),
    updateSkill: async ({ caller, body }) => ({ skill: presentSkill(await skills.update(caller.userId, body)) }),
    deleteSkill: async ({ caller, query, body }) => {
      const skillId = idFromQueryOrBody('skillId', query, body);
      await skills.delete(caller.userId, skillId);
      return { skillId, deleted: true };
    },
  };
}
