import type { components } from '../../../generated/api';
import { millis } from '../../platform/db/timestamps';
import type { OutputView } from './repository';

type Schemas = components['schemas'];

export function presentOutput(row: OutputView): Schemas['Output'] {
  return {
    outputId: row.id,
    type: row.type as Schemas['OutputType'],
    name: row.name,
    mimeType: row.mime_type,
    sizeBytes: row.size_bytes,
    sha256: row.sha256,
    conversationId: row.conversation_id,
    automationId: row.automation_id,
    createdAt: millis(row.created_at),
    origin: row.origin as Schemas['OutputOrigin'],
    generationId: row.generation_id,
    projectId: row.project_id,
    prompt: row.prompt,
    model: row.model,
    connectionId: row.connection_id,
    sourceFileId: row.source_file_id,
  };
}
