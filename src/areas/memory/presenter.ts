import type { components } from '../../../generated/api';
import { millis } from '../../platform/db/timestamps';
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
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}
