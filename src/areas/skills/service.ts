import type { Selectable } from 'kysely';
import type { RequestInput } from '../../platform/api-types';
import type { Skills } from '../../../generated/db';
import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import { type Database, PgError, pgErrorCode } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import type { ProjectService } from '../projects/service';
import * as repo from './repository';

type CreateInput = RequestInput<'SkillCreateRequest'>;
type UpdateInput = RequestInput<'SkillUpdateRequest'>;
export type SkillRow = Selectable<Skills>;

/** Runs a write whose only expected failure is the per-user unique skill name. */
async function withUniqueName<T>(name: string | undefined, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (pgErrorCode(error) === PgError.uniqueViolation) {
      throw errors.conflict(`You already have a skill named "${name ?? ''}".`);
    }
    throw error;
  }
}

export class SkillService {
  constructor(
    private readonly db: Database,
    private readonly projects: ProjectService,
  ) {}

  async get(userId: string, skillId: string): Promise<SkillRow> {
    const row = await repo.findSkill(this.db, userId, skillId);
    if (!row) throw errors.notFound('Skill not found.');
    return row;
  }

  /** The owner of a skill the caller may read; undefined when they cannot see it. */
  async ownerOf(userId: string, skillId: string): Promise<string | undefined> {
    return (await repo.findSkill(this.db, userId, skillId))?.owner_user_id;
  }

  async list(userId: string, filter: { projectId?: string; enabled?: boolean }, page: PageRequest) {
    return repo.skillList.page(this.db, { ownerUserId: userId, ...filter }, page);
  }

  async create(userId: string, input: CreateInput): Promise<SkillRow> {
    await this.projects.requireOwnedIfNamed(userId, input.projectId);
    const now = new Date();
    return withUniqueName(input.name, () =>
      repo.insertSkill(this.db, {
        id: uuidv7(now.getTime()),
        owner_user_id: userId,
        project_id: input.projectId ?? null,
        name: input.name,
        description: input.description ?? '',
        instructions: input.instructions ?? '',
        greeting: input.greeting ?? '',
        enabled: input.enabled ?? true,
        created_at: now,
        updated_at: now,
      }),
    );
  }

  async update(userId: string, input: UpdateInput): Promise<SkillRow> {
    await this.projects.requireOwnedIfNamed(userId, input.projectId);
    const updated = await withUniqueName(input.name, () =>
      repo.updateSkill(this.db, userId, input.skillId, {
        name: input.name,
        description: input.description,
        instructions: input.instructions,
        greeting: input.greeting,
        enabled: input.enabled,
        project_id: input.projectId,
        updated_at: new Date(),
      }),
    );
    if (!updated) throw errors.notFound('Skill not found.');
    return updated;
  }

  async delete(userId: string, skillId: string): Promise<void> {
    if (!(await repo.deleteSkill(this.db, userId, skillId))) throw errors.notFound('Skill not found.');
  }
}
