import type { Selectable } from 'kysely';
import type { RequestInput } from '../../platform/api-types';
import type { Projects } from '../../../generated/db';
import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import type { Database } from '../../platform/db';
import type { AccessScope } from '../../platform/db/access';
import { isSelfOrAncestor, lockForTransaction } from '../../platform/db/locks';
import { uuidv7 } from '../../platform/ids';
import * as repo from './repository';

type CreateInput = RequestInput<'ProjectCreateRequest'>;
type UpdateInput = RequestInput<'ProjectUpdateRequest'>;
export type ProjectRow = Selectable<Projects>;

export class ProjectService {
  constructor(private readonly db: Database) {}

  /** One of the caller's own projects (what a record of theirs may be put in); 404 otherwise. */
  async get(userId: string, projectId: string): Promise<ProjectRow> {
    const row = await repo.findProject(this.db, userId, projectId);
    if (!row) throw errors.notFound('Project not found.');
    return row;
  }

  /** A project the caller may read: theirs, or one shared with them; 404 otherwise. */
  async readable(userId: string, projectId: string): Promise<ProjectRow> {
    const row = await repo.findReadableProject(this.db, userId, projectId);
    if (!row) throw errors.notFound('Project not found.');
    return row;
  }

  /** The owner of a project the caller may read; undefined when they cannot see it. */
  async ownerOf(userId: string, projectId: string): Promise<string | undefined> {
    return (await repo.findReadableProject(this.db, userId, projectId))?.owner_user_id;
  }

  /**
   * Throws 404 naming the body `field` unless `projectId` is one of the caller's projects (other
   * areas check their `projectId` references here).
   */
  async requireOwned(userId: string, projectId: string, db: Database = this.db, field = 'projectId'): Promise<void> {
    if (!(await repo.findProject(db, userId, projectId)))
      throw errors.referenceNotFound(field, field === 'parentId' ? 'Parent project not found.' : 'Project not found.');
  }

  /** Whether the user has any project (onboarding's `first_project`). */
  hasAny(userId: string): Promise<boolean> {
    return repo.ownsAny(this.db, userId);
  }

  /** Checks the project a create or update names, if it names one (absent or null: no project to check). */
  async requireOwnedIfNamed(userId: string, projectId: string | null | undefined, db: Database = this.db): Promise<void> {
    if (projectId !== undefined && projectId !== null) await this.requireOwned(userId, projectId, db);
  }

  /** The caller's projects and those shared with them (per `scope`). */
  async list(userId: string, filter: { parentId?: string; scope?: AccessScope }, page: PageRequest) {
    return repo.readableProjectList.page(this.db, { userId, ...filter }, page);
  }

  async create(userId: string, input: CreateInput): Promise<ProjectRow> {
    if (input.clientId !== undefined) {
      const existing = await repo.findProjectByClientId(this.db, userId, input.clientId);
      if (existing) return existing;
    }
    if (input.parentId !== undefined) await this.requireOwned(userId, input.parentId, this.db, 'parentId');
    const now = new Date();
    const inserted = await repo.insertProject(this.db, {
      id: uuidv7(now.getTime()),
      owner_user_id: userId,
      name: input.name,
      description: input.description ?? '',
      instructions: input.instructions ?? '',
      color: input.color ?? null,
      parent_id: input.parentId ?? null,
      client_id: input.clientId ?? null,
      created_at: now,
      updated_at: now,
    });
    if (inserted) return inserted;
    // A concurrent create with the same clientId won the race: answer with its project.
    const winner = await repo.findProjectByClientId(this.db, userId, input.clientId as string);
    if (!winner) throw new Error('project insert returned nothing without a clientId conflict');
    return winner;
  }

  async update(userId: string, input: UpdateInput): Promise<ProjectRow> {
    return this.db.transaction().execute(async (trx) => {
      await lockForTransaction(trx, `projects:${userId}`);
      if (!(await repo.findProject(trx, userId, input.projectId))) throw errors.notFound('Project not found.');
      if (input.parentId !== undefined && input.parentId !== null) {
        await this.requireOwned(userId, input.parentId, trx, 'parentId');
        if (await isSelfOrAncestor(trx, 'projects', input.parentId, input.projectId)) {
          throw errors.conflict('A project cannot be moved under itself or one of its sub-projects.');
        }
      }
      const updated = await repo.updateProject(trx, userId, input.projectId, {
        name: input.name,
        description: input.description,
        instructions: input.instructions,
        color: input.color,
        parent_id: input.parentId,
        updated_at: new Date(),
      });
      if (!updated) throw errors.notFound('Project not found.');
      return updated;
    });
  }

  async delete(userId: string, projectId: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await lockForTransaction(trx, `projects:${userId}`);
      if (!(await repo.findProject(trx, userId, projectId))) throw errors.notFound('Project not found.');
      if (await repo.hasChildren(trx, projectId)) {
        throw errors.conflict('The project has sub-projects: move or delete them first.');
      }
      await repo.deleteProject(trx, userId, projectId);
    });
  }
}
