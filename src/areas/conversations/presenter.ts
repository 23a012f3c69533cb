import type { components } from '../../../generated/api';
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
