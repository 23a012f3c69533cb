import type { Selectable } from 'kysely';
import type { RequestInput } from '../../platform/api-types';
import type { Skills } from '../../../generated/db';
import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import { type Database, PgError, pgErrorCode } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import type { ProjectService } from '../projects/service';
import * as repo from './repository';
import { type KnowledgeScope, type SkillReferences, SkillChecks, type SkillTool } from './checks';

export type { KnowledgeScope, SkillReferences, SkillTool } from './checks';

type CreateInput = RequestInput<'SkillCreateRequest'>;
type UpdateInput = RequestInput<'SkillUpdateRequest'>;
export type SkillAccess = repo.SkillAccess;
export type SkillRow = Selectable<Skills> & { access: SkillAccess };

/** A skill as chat applies it (`SkillService.forChat`). */
export interface AppliedSkill {
  id: string;
  name: string;
  instructions: string;
  model: string | null;
  tools: SkillTool[];
  knowledgeScope: KnowledgeScope | null;
}

/** How a chat request's `model` names a skill (`skill:<skillId>`, as `/v1/models` lists skills). */
export const SKILL_MODEL_PREFIX = 'skill:';

const PERMISSION_RANK: Record<SkillAccess, number> = { read: 0, use: 1, edit: 2, owner: 3 };

/** Runs a write whose only expected failure is the per-owner unique skill name. */
async function withUniqueName<T>(name: string | undefined, owned: boolean, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (pgErrorCode(error) === PgError.uniqueViolation) {
      throw errors.conflict(`${owned ? 'You already have' : "The skill's owner already has"} a skill named "${name ?? ''}".`);
    }
    throw error;
  }
}

/**
 * Skills: instructions, a greeting and, as assistants, a model, tools and a knowledge scope. A
 * skill is its owner's; grants (`access_grants`, kind `skill`) let others read it, chat with it
 * (`use`) or change it (`edit`), read in the repository's SQL on every request.
 */
export class SkillService {
  private readonly checks: SkillChecks;

  constructor(
    private readonly db: Database,
    private readonly projects: Pick<ProjectService, 'requireOwnedIfNamed'>,
    references: SkillReferences,
  ) {
    this.checks = new SkillChecks(references);
  }

  /** A skill the caller owns or holds a grant on, with their access; 404 otherwise. */
  async get(userId: string, skillId: string): Promise<SkillRow> {
    const row = await repo.findSkillFor(this.db, userId, skillId);
    if (!row) throw errors.notFound('Skill not found.');
    return row;
  }

  /**
   * The owner of a skill the caller may read (their own, or one granted to them); undefined when
   * they cannot see it. The grant resolver's question: the owner manages its grants.
   */
  async ownerOf(userId: string, skillId: string): Promise<string | undefined> {
    return (await repo.findSkillFor(this.db, userId, skillId))?.owner_user_id;
  }

  async list(userId: string, filter: { projectId?: string; enabled?: boolean }, page: PageRequest) {
    return repo.skillList.page(this.db, { userId, ...filter }, page);
  }

  /**
   * The skill as a chat applies it: one the caller owns or holds `use` on (404 naming `field`
   * otherwise, also for one they may only read).
   */
  async forChat(userId: string, skillId: string, field: string): Promise<AppliedSkill> {
    const row = await repo.findSkillFor(this.db, userId, skillId);
    if (!row || PERMISSION_RANK[row.access] < PERMISSION_RANK.use)
      throw errors.referenceNotFound(field, `Skill not found: ${field} must name a skill you may use.`);
    if (!row.enabled) throw errors.conflict('The skill is disabled; enable it to chat with it.');
    return {
      id: row.id,
      name: row.name,
      instructions: row.instructions,
      model: row.model,
      tools: row.tools as unknown as SkillTool[],
      knowledgeScope: row.knowledge_scope as unknown as KnowledgeScope | null,
    };
  }

  /** The skills the caller may chat with (own and granted `use`), as `/v1/models` lists them. */
  async usable(userId: string): Promise<Array<{ id: string; name: string }>> {
    return repo.usableSkills(this.db, userId);
  }

  async create(userId: string, input: CreateInput): Promise<SkillRow> {
    await this.projects.requireOwnedIfNamed(userId, input.projectId);
    const checked = await this.checks.assistant(userId, input);
    const now = new Date();
    const row = await withUniqueName(input.name, true, () =>
      repo.insertSkill(this.db, {
        id: uuidv7(now.getTime()),
        owner_user_id: userId,
        project_id: input.projectId ?? null,
        name: input.name,
        description: input.description ?? '',
        instructions: input.instructions ?? '',
        greeting: input.greeting ?? '',
        enabled: input.enabled ?? true,
        model: checked.model ?? null,
        tools: JSON.stringify(checked.tools ?? []),
        knowledge_scope: checked.knowledgeScope ? JSON.stringify(checked.knowledgeScope) : null,
        starter_prompts: JSON.stringify(input.starterPrompts ?? []),
        created_at: now,
        updated_at: now,
      }),
    );
    return { ...row, access: 'owner' };
  }

  /** Changes a skill its owner, or a holder of `edit`, may change: 403 for `read` or `use`, 404 for anyone else. */
  async update(userId: string, input: UpdateInput): Promise<SkillRow> {
    const current = await this.get(userId, input.skillId);
    if (PERMISSION_RANK[current.access] < PERMISSION_RANK.edit)
      throw errors.forbidden('This skill is shared with you to read or use, not to change.');
    // What the skill names is the owner's: their projects, models, tools and knowledge.
    const owner = current.owner_user_id;
    await this.projects.requireOwnedIfNamed(owner, input.projectId);
    const checked = await this.checks.assistant(owner, input);
    const updated = await withUniqueName(input.name, current.access === 'owner', () =>
      repo.updateSkill(this.db, userId, input.skillId, {
        name: input.name,
        description: input.description,
        instructions: input.instructions,
        greeting: input.greeting,
        enabled: input.enabled,
        project_id: input.projectId,
        model: checked.model,
        tools: checked.tools === undefined ? undefined : JSON.stringify(checked.tools),
        knowledge_scope:
          checked.knowledgeScope === undefined ? undefined : checked.knowledgeScope ? JSON.stringify(checked.knowledgeScope) : null,
        starter_prompts: input.starterPrompts === undefined ? undefined : JSON.stringify(input.starterPrompts),
        updated_at: new Date(),
      }),
    );
    // The grant was withdrawn between the two statements.
    if (!updated) throw errors.notFound('Skill not found.');
    return { ...updated, access: current.access };
  }

  /** Only the owner deletes a skill: 403 for a grantee, 404 for anyone else. */
  async delete(userId: string, skillId: string): Promise<void> {
    const current = await this.get(userId, skillId);
    if (current.access !== 'owner') throw errors.forbidden('Only the owner can delete this skill.');
    if (!(await repo.deleteSkill(this.db, userId, skillId))) throw errors.notFound('Skill not found.');
  }
}
