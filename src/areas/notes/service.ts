import type { Selectable } from 'kysely';
import type { RequestInput } from '../../platform/api-types';
import type { Notes } from '../../../generated/db';
import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import type { Database } from '../../platform/db';
import { JsonPageQuery } from '../../platform/db/json-page';
import { uuidv7 } from '../../platform/ids';
import type { JsonPage } from '../../platform/pagination';
import type { ProjectService } from '../projects/service';
import { noteItemColumns, noteItemJson } from './presenter';
import * as repo from './repository';

type CreateInput = RequestInput<'NoteCreateRequest'>;
type UpdateInput = RequestInput<'NoteUpdateRequest'>;
export type NoteRow = Selectable<Notes>;

/** Pages of notes written as JSON straight from their rows, their query compiled once per combination of filters. */
const notePages = (db: Database) =>
  new JsonPageQuery(db, {
    rows: (args: repo.NotesPage) => repo.pageOfNotes(db, args).select(noteItemColumns),
    item: noteItemJson,
    shape: repo.notesPageShape,
    parameters: repo.notesPageParameters,
  });

export class NoteService {
  private readonly pages: ReturnType<typeof notePages>;

  constructor(
    private readonly db: Database,
    private readonly projects: ProjectService,
  ) {
    this.pages = notePages(db);
  }

  async get(userId: string, noteId: string): Promise<NoteRow> {
    const row = await repo.findNote(this.db, userId, noteId);
    if (!row) throw errors.notFound('Note not found.');
    return row;
  }

  /** A page of notes, each written as `presentNote` presents one. */
  list(userId: string, filter: repo.NoteFilter, page: PageRequest): Promise<JsonPage> {
    return this.pages.run({ ownerUserId: userId, filter, page });
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
