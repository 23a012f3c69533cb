import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentNote } from './presenter';
import type { NoteService } from './service';

export function noteHandlers(notes: NoteService): Pick<HandlerMap, 'getNotes' | 'createNote' | 'updateNote' | 'deleteNote'> {
  return {
    getNotes: async ({ caller, query }) => {
      if (query.noteId !== undefined) return { note: presentNote(await notes.get(caller.userId, query.noteId)) };
      const page = await notes.list(caller.userId, { projectId: query.projectId, pinned: query.pinned }, readPage(query));
      return { notes: page.items.map(presentNote), nextCursor: page.nextCursor };
    },
    createNote: async ({ caller, body }) => ({ note: presentNote(await notes.create(caller.userId, body)) }),
    updateNote: async ({ caller, body }) => ({ note: presentNote(await notes.update(caller.userId, body)) }),
    deleteNote: async ({ caller, query, body }) => {
      const noteId = idFromQueryOrBody('noteId', query, body);
      await notes.delete(caller.userId, noteId);
      return { noteId, deleted: true };
    },
  };
}
