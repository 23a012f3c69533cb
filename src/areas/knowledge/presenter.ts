import type { components } from '../../../generated/api';
import { presentSnippet } from '../../platform/snippet';
import type { Hit } from './repository';

export function presentKnowledgeResult(hit: Hit, score: number): components['schemas']['KnowledgeResult'] {
  return {
    kind: hit.kind,
    id: hit.id,
    title: hit.title,
    ...presentSnippet(hit.snippet),
    score,
    projectId: hit.project_id,
    fileId: hit.file_id,
    chunkIndex: hit.seq,
    startOffset: hit.start_offset,
    endOffset: hit.end_offset,
  };
}
