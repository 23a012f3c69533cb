import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentNote } from './presenter';
import type { NoteService } from './service';

export function noteHandlers(notes: NoteService): Pick<HandlerMap, 'getNotes' | 'createNote' | 'updateNote' | 'deleteNote'> {
  return {
    getNotes: async ({ caller, query }) => {
      if (query.noteId !== undefined) return { note: presentNote(await notes.get(caller.userId, query.noteId), caller.userId) };
      const page = await notes.list(
        caller.userId,
        { projectId: query.projectId, pinned: query.pinned, scope: query.scope },
        readPage(query),
      );
      return { notes: page.items.map((row) => presentNote(row, caller.userId)), nextCursor: page.nextCursor };
    },
    createNote: async ({ caller, body }) => ({ note: presentNote(await notes.create(caller.userId, body), caller.userId) }),
    updateNote: async ({ caller, body }) => ({ note: presentNote(await notes.update(caller.userId, body), caller.userId) }),
    deleteNote: async ({ caller, query, body }) => {
      const noteId = idFromQueryOrBody('noteId', query, body);
      await notes.delete(caller.userId, noteId);
      return { noteId, deleted: true };
    },
  };
}
