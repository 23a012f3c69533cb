import type { components } from '../../../generated/api';
import { millis, millisOrNull } from '../../platform/db/timestamps';
import { presentSnippet } from '../../platform/snippet';
import { presentRecordedUsage } from '../../platform/usage';
import type { ApprovalView, ConversationView, MessageView } from './repository';

type Schemas = components['schemas'];

export function presentConversation(row: ConversationView): Schemas['Conversation'] {
  return {
    conversationId: row.id,
    title: row.title,
    projectId: row.project_id,
    archived: row.archived,
    model: row.model,
    temporary: row.temporary,
    currentLeafId: row.current_leaf_id,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}

/** A message; `siblingIds` where it is listed with them (see `ConversationService.messages`). */
export function presentMessage(row: MessageView, siblingIds?: string[]): Schemas['Message'] {
  return {
    messageId: row.id,
    conversationId: row.conversation_id,
    parentId: row.parent_id,
    ...(siblingIds ? { siblingIds } : {}),
    role: row.role as Schemas['Message']['role'],
    content: row.content,
    citations: presentCitations(row.citations),
    attachments: presentAttachments(row.attachments),
    status: row.status as Schemas['Message']['status'],
    skillId: row.agent_id,
    agentId: row.agent_id,
    model: row.model,
    errorCode: row.error_code as Schemas['Message']['errorCode'],
    errorMessage: row.error_message,
    // A paused or stopped reply shows the usage of its model calls so far; one still generating or failed, none.
    usage: ['complete', 'awaiting_approval', 'stopped'].includes(row.status) ? presentRecordedUsage(row) : null,
    parts: (row.parts as unknown as Schemas['MessagePart'][]).map(presentPart),
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}

/** A message's stored attachments (`messages.attachments`), in the document's property order. */
export function presentAttachments(stored: unknown): Schemas['MessageAttachment'][] {
  return ((stored ?? []) as Schemas['MessageAttachment'][]).map((a) => ({
    fileId: a.fileId,
    name: a.name,
    contentType: a.contentType,
    sizeBytes: a.sizeBytes,
    kind: a.kind,
    width: a.width,
    height: a.height,
  }));
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

export function presentApproval(row: ApprovalView): Schemas['Approval'] {
  return {
    approvalId: row.id,
    conversationId: row.conversation_id,
    messageId: row.message_id,
    toolCallId: row.tool_call_id,
    toolName: row.tool_name,
    arguments: row.arguments as Record<string, unknown>,
    argumentsDigest: row.arguments_digest,
    status: row.status as Schemas['ApprovalStatus'],
    createdAt: millis(row.created_at),
    expiresAt: millis(row.expires_at),
    decidedAt: millisOrNull(row.decided_at),
  };
}

/** A stored part in the schema's property order (a jsonb column does not keep it). */
export function presentPart(part: Schemas['MessagePart']): Schemas['MessagePart'] {
  switch (part.type) {
    case 'text':
      return { type: 'text', text: part.text };
    case 'tool-call':
      return {
        type: 'tool-call',
        toolCallId: part.toolCallId,
        toolName: part.toolName,
        arguments: part.arguments,
        policy: part.policy,
        approvalId: part.approvalId,
      };
    case 'tool-result':
      return {
        type: 'tool-result',
        toolCallId: part.toolCallId,
        toolName: part.toolName,
        outcome: part.outcome,
        output: part.output,
        isError: part.isError,
        truncated: part.truncated,
      };
    case 'tool-source-unavailable':
      return { type: 'tool-source-unavailable', serverId: part.serverId, serverName: part.serverName, reason: part.reason };
  }
}
