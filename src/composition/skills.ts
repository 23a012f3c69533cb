import type { FileService } from '../areas/files/service';
import type { ModelService } from '../areas/models/service';
import type { ProjectService } from '../areas/projects/service';
import { type SkillReferences, SkillService } from '../areas/skills/service';
import type { ToolService } from '../areas/tools/service';
import type { Database } from '../platform/db';
import { ApiError, errors } from '../platform/errors';

/** The services a skill's references are checked through, read when a request checks them (some are built after skills). */
export interface SkillReferenceServices {
  models: Pick<ModelService, 'check'>;
  tools: Pick<ToolService, 'list'>;
  projects: Pick<ProjectService, 'get'>;
  files: Pick<FileService, 'get'>;
}

/** A 404 of `read` as a 404 naming the body's `field`. */
async function naming(field: string, what: string, read: () => Promise<unknown>): Promise<void> {
  try {
    await read();
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) throw errors.referenceNotFound(field, `${what} not found.`);
    throw error;
  }
}

/** What skills check the model, tools, projects and files they name through. */
export function skillReferences(services: () => SkillReferenceServices): SkillReferences {
  return {
    checkModel: (userId, modelId, field) => services().models.check(userId, modelId, 'chat', field),
    toolNames: async (userId) => new Set((await services().tools.list(userId)).tools.map((tool) => tool.name)),
    requireProject: (userId, projectId, field) => naming(field, 'Project', () => services().projects.get(userId, projectId)),
    requireFile: (userId, fileId, field) => naming(field, 'File', () => services().files.get(userId, fileId)),
  };
}

/** The skills, checking what they name through `services` (read per request: the tool registry and files are built after skills). */
export function createSkills(db: Database, projects: ProjectService, services: () => SkillReferenceServices): SkillService {
  return new SkillService(db, projects, skillReferences(services));
}
