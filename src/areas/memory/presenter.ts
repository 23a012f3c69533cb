import type { components } from '../../../generated/api';
import type { MemoryView } from './repository';

type Schemas = components['schemas'];

export function presentMemoryItem(row: MemoryView): Schemas['MemoryItem'] {
  return {
    memoryId: row.id,
    kind: row.kind as Schemas['MemoryKind'],
    content: row.content,
    projectId: row.project_id,
    source: row.source as Schemas['MemorySource'],
    sourceRef: row.source_ref,
    createdAt: row.created_at.getTime(),
    updatedAt: row.updated_at.getTime(),
  };
}
