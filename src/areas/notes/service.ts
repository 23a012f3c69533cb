import type { Selectable } from 'kysely';
import type { RequestInput } from '../../platform/api-types';
import type { Notes } from '../../../generated/db';
import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import type { Database } from '../../platform/db';
import { sharedProjects } from '../../platform/db/access';
import { uuidv7 } from '../../platform/ids';
import type { ProjectService } from '../projects/service';
import * as repo from './repository';

type CreateInput = RequestInput<'NoteCreateRequest'>;
type UpdateInput = RequestInput<'NoteUpdateRequest'>;
export type NoteRow = Selectable<Notes>;

export class NoteService {
  constructor(
    private readonly db: Database,
    private readonly projects: ProjectService,
  ) {}

  /** A note the caller may read: theirs, or one in a project shared with them; 404 otherwise. */
  async get(userId: string, noteId: string): Promise<NoteRow> {
    const row = await repo.findReadableNote(this.db, userId, noteId);
    if (!row) throw errors.notFound('Note not found.');
    return row;
  }

  /** The caller's notes and those in projects shared with them (per `scope`). */
  async list(userId: string, filter: Omit<repo.NoteFilter, 'shared'>, page: PageRequest) {
    const shared = filter.scope === 'owned' ? [] : await sharedProjects(this.db, userId);
    return repo.readableNoteList.page(this.db, { userId, ...filter, shared }, page);
  }

  async create(userId: string, input: CreateInput): Promise<NoteRow> {
    await this.projects.requireOwnedIfNamed(userId, input.projectId);
    const now = new Date();
    return repo.insertNote(this.db, {
      id: uuidv7(now.getTime()),
      owner_user_id: userId,
      project_id: input.projectId ?? null,
      title: input.title ?? '',
      content: input.content ?? '',
      pinned: input.pinned ?? false,
      created_at: now,
      updated_at: now,
    });
  }

  async update(userId: string, input: UpdateInput): Promise<NoteRow> {
    await this.projects.requireOwnedIfNamed(userId, input.projectId);
    const updated = await repo.updateNote(this.db, userId, input.noteId, {
      title: input.title,
      content: input.content,
      project_id: input.projectId,
      pinned: input.pinned,
      updated_at: new Date(),
    });
    if (!updated) throw errors.notFound('Note not found.');
    return updated;
  }

  async delete(userId: string, noteId: string): Promise<void> {
    if (!(await repo.deleteNote(this.db, userId, noteId))) throw errors.notFound('Note not found.');
  }
}
