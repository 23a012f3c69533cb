import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentProject } from './presenter';
import type { ProjectService } from './service';

export function projectHandlers(
  projects: ProjectService,
): Pick<HandlerMap, 'getProjects' | 'createProject' | 'updateProject' | 'deleteProject'> {
  return {
    getProjects: async ({ caller, query }) => {
      if (query.projectId !== undefined) {
        return { project: presentProject(await projects.readable(caller.userId, query.projectId), caller.userId) };
      }
      const page = await projects.list(caller.userId, { parentId: query.parentId, scope: query.scope }, readPage(query));
      return { projects: page.items.map((row) => presentProject(row, caller.userId)), nextCursor: page.nextCursor };
    },
    createProject: async ({ caller, body }) => ({
      project: presentProject(await projects.create(caller.userId, body), caller.userId),
    }),
    updateProject: async ({ caller, body }) => ({
      project: presentProject(await projects.update(caller.userId, body), caller.userId),
    }),
    deleteProject: async ({ caller, query, body }) => {
      const projectId = idFromQueryOrBody('projectId', query, body);
      await projects.delete(caller.userId, projectId);
      return { projectId, deleted: true };
    },
  };
}
