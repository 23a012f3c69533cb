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
        return { project: presentProject(await projects.get(caller.userId, query.projectId)) };
      }
      const page = await projects.list(caller.userId, { parentId: query.parentId }, readPage(query));
      return { projects: page.items.map(presentProject), nextCursor: page.nextCursor };
    },
    createProject: async ({ caller, body }) => ({
      project: presentProject(await projects.create(caller.userId, body)),
    }),
    updateProject: async ({ caller, body }) => ({
      project: presentProject(await projects.update(caller.userId, body)),
    }),
    deleteProject: async ({ caller, query, body }) => {
      const projectId = idFromQueryOrBody('projectId', query, body);
      await projects.delete(caller.userId, projectId);
      return { projectId, deleted: true };
    },
  };
}
