import type { components } from '../../../generated/api';
import { millis, millisOrNull } from '../../platform/db/timestamps';
import { presentRecordedUsage } from '../../platform/usage';
import type { AutomationView, RunView } from './repository';
import type { TestResult } from './service';

type Schemas = components['schemas'];

export function presentAutomation(row: AutomationView): Schemas['Automation'] {
  const scheduled = row.cron !== null && row.timezone !== null;
  return {
    automationId: row.id,
    name: row.name,
    prompt: row.prompt,
    schedule: scheduled ? { cron: row.cron as string, timezone: row.timezone as string } : null,
    enabled: row.enabled,
    projectId: row.project_id,
    skillIds: row.skill_ids,
    model: row.model,
    outputFormat: row.output_format as Schemas['AutomationOutputFormat'],
    nextRunAt: scheduled && row.enabled && row.next_run_at !== null ? millis(row.next_run_at) : null,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}

export function presentRun(
  row: RunView,
  outputs: { id: string; name: string; mime_type: string; size_bytes: number }[],
): Schemas['AutomationRun'] {
  const byId = new Map(outputs.map((o) => [o.id, o]));
  return {
    runId: row.id,
    automationId: row.automation_id,
    status: row.status as Schemas['AutomationRunStatus'],
    trigger: row.trigger as Schemas['AutomationRun']['trigger'],
    scheduledFor: millisOrNull(row.scheduled_for),
    attempt: row.attempt,
    createdAt: millis(row.created_at),
    startedAt: millisOrNull(row.started_at),
    finishedAt: millisOrNull(row.finished_at),
    errorCode: row.error_code,
    errorMessage: row.error_message,
    usage: presentRecordedUsage(row),
    outputs: row.output_ids
      .map((id) => byId.get(id))
      .filter((o) => o !== undefined)
      .map((o) => ({ outputId: o.id, name: o.name, mimeType: o.mime_type, sizeBytes: o.size_bytes })),
  };
}

export function presentTestResult({ problems, nextRuns, preview }: TestResult): Schemas['AutomationTestResponse'] {
  return {
    valid: problems.length === 0,
    errors: problems,
    nextRuns: nextRuns.map((slot) => slot.getTime()),
    preview: preview && { content: preview.content, mimeType: preview.mimeType, usage: preview.usage },
  };
}
