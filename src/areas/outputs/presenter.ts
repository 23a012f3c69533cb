import type { Selectable } from 'kysely';
import type { components } from '../../../generated/api';
import type { Outputs } from '../../../generated/db';

type Schemas = components['schemas'];

export function presentOutput(row: Selectable<Outputs>): Schemas['Output'] {
  return {
    outputId: row.id,
    type: row.type as Schemas['OutputType'],
    name: row.name,
    mimeType: row.mime_type,
    sizeBytes: row.size_bytes,
    sha256: row.sha256,
    conversationId: row.conversation_id,
    automationId: row.automation_id,
    createdAt: row.created_at.getTime(),
    origin: row.origin as Schemas['OutputOrigin'],
    generationId: row.generation_id,
    projectId: row.project_id,
    prompt: row.prompt,
    model: row.model,
    connectionId: row.connection_id,
    sourceFileId: row.source_file_id,
  };
}
