import type { components } from '../../../generated/api';
import { presentSnippet } from '../../platform/snippet';
import { presentRecordedUsage } from '../../platform/usage';
import type { ConversationRow, MessageRow } from './repository';

type Schemas = components['schemas'];

export function presentConversation(row: ConversationRow): Schemas['Conversation'] {
  return {
    conversationId: row.id,
    title: row.title,
    projectId: row.project_id,
    archived: row.archived,
    model: row.model,
    createdAt: row.created_at.getTime(),
    updatedAt: row.updated_at.getTime(),
  };
}

export function presentMessage(row: MessageRow): Schemas['Message'] {
  return {
    messageId: row.id,
    conversationId: row.conversation_id,
    role: row.role as Schemas['Message']['role'],
    content: row.content,
    citations: presentCitations(row.citations),
    status: row.status as Schemas['Message']['status'],
    agentId: row.agent_id,
    model: row.model,
    errorCode: row.error_code as Schemas['Message']['errorCode'],
    errorMessage: row.error_message,
    usage: presentRecordedUsage(row),
    createdAt: row.created_at.getTime(),
    updatedAt: row.updated_at.getTime(),
  };
}

/** A citation as a reply stores it (`messages.citations`): the API's Citation without `highlights`. */
export type StoredCitation = Omit<Schemas['Citation'], 'highlights'>;

/** A reply's stored citations, in the document's property order. */
export function presentCitations(stored: unknown): Schemas['Citation'][] {
  return ((stored ?? []) as StoredCitation[]).map((c) => {
    const { snippet, highlights } = presentSnippet(c.snippet);
    return {
      number: c.number,
      sourceType: c.sourceType,
      sourceId: c.sourceId,
      title: c.title,
      snippet,
      highlights,
      projectId: c.projectId,
      fileId: c.fileId,
      chunkIndex: c.chunkIndex,
      startOffset: c.startOffset,
      endOffset: c.endOffset,
    };
  });
}
