import type { RequestInput, Schemas } from '../../platform/api-types';
import { ApiError, errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import { type ChatMessage, type ChatUsage, describeProviderError, type ModelInfo, ModelProviderFailure } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import type { BudgetGate, EntitlementGuard } from '../billing/service';
import type { ModelService } from '../models/service';
import type { ProjectService } from '../projects/service';
import type { SkillService } from '../skills/service';
import * as repo from './repository';
import { cronProblem, nextSlots, timezoneProblem } from './schedule';

type CreateInput = RequestInput<'AutomationCreateRequest'>;
type UpdateInput = RequestInput<'AutomationUpdateRequest'>;
type TestInput = RequestInput<'AutomationTestRequest'>;
export type TestError = Schemas['AutomationTestError'];
export type OutputFormat = Schemas['AutomationOutputFormat'];

/** What an automation is made of, for validation and for running it. */
interface Draft {
  prompt: string;
  schedule?: { cron: string; timezone: string } | null;
  projectId?: string | null;
  skillIds?: string[];
  model?: string | null;
  outputFormat: OutputFormat;
}

export const MIME_TYPES: Record<OutputFormat, string> = { markdown: 'text/markdown', text: 'text/plain', json: 'application/json' };
const FORMAT_INSTRUCTIONS: Record<OutputFormat, string> = {
  markdown: 'Answer in Markdown.',
  text: 'Answer in plain text, without Markdown.',
  json: 'Answer with one JSON document only, without any other text or code fences.',
};
const NEXT_RUNS = 5;

/** The output of one execution of an automation's prompt. */
export interface Generated {
  content: string;
  mimeType: string;
  usage: ChatUsage;
  model: ModelInfo;
  /** The user's own connection the model was called through (recorded, not charged), or null. */
  connectionId: string | null;
}

export interface RunWithOutputs {
  run: repo.RunRow;
  outputs: Awaited<ReturnType<typeof repo.outputsOf>>;
}

/** The verdict on a draft: its problems, the next slots of its schedule, a dry run's output. */
export interface TestResult {
  problems: TestError[];
  nextRuns: Date[];
  preview: Generated | null;
}

/** A run's failure: its code and a message for people. */
export class RunFailure extends Error {
  constructor(
    readonly code: 'invalid_output' | 'model_provider_error' | 'model_provider_timeout' | 'budget_exhausted' | 'quota_exceeded',
    message: string,
  ) {
    super(message);
  }
}

/** What an AutomationService is built from. */
export interface AutomationServiceDeps {
  db: Database;
  models: Pick<ModelService, 'resolve' | 'problem'>;
  projects: ProjectService;
  skills: SkillService;
  /** How long a run (and a dry run) may take. */
  runTimeoutMs: number;
  billing: BudgetGate & Pick<EntitlementGuard, 'requireAutomationSlot'>;
}

/**
 * Automations: drafts validated before they are saved, their schedule (the next slot is kept on
 * the row for the scheduler), and the execution of their prompt shared by runs and dry runs.
 */
export class AutomationService {
  private readonly db: Database;
  private readonly models: Pick<ModelService, 'resolve' | 'problem'>;
  private readonly projects: ProjectService;
  private readonly skills: SkillService;
  private readonly runTimeoutMs: number;
  private readonly billing: BudgetGate & Pick<EntitlementGuard, 'requireAutomationSlot'>;

  constructor({ db, models, projects, skills, runTimeoutMs, billing }: AutomationServiceDeps) {
    this.db = db;
    this.models = models;
    this.projects = projects;
    this.skills = skills;
    this.runTimeoutMs = runTimeoutMs;
    this.billing = billing;
  }

  async get(userId: string, automationId: string): Promise<repo.AutomationRow> {
    const row = await repo.findAutomation(this.db, userId, automationId);
    if (!row) throw errors.notFound('Automation not found.');
    return row;
  }

  async list(userId: string, filter: { enabled?: boolean }, page: PageRequest) {
    return repo.automationList.page(this.db, { ownerUserId: userId, ...filter }, page);
  }

  async create(userId: string, input: CreateInput): Promise<repo.AutomationRow> {
    await this.requireValid(userId, { ...input, outputFormat: input.outputFormat ?? 'markdown' });
    const now = new Date();
    const enabled = input.enabled ?? true;
    return this.db.transaction().execute(async (trx) => {
      await this.billing.requireAutomationSlot(trx, userId);
      return repo.insertAutomation(trx, {
        id: uuidv7(now.getTime()),
        owner_user_id: userId,
        name: input.name,
        prompt: input.prompt,
        cron: input.schedule?.cron ?? null,
        timezone: input.schedule?.timezone ?? null,
        enabled,
        project_id: input.projectId ?? null,
        skill_ids: input.skillIds ?? [],
        model: input.model ?? null,
        output_format: input.outputFormat ?? 'markdown',
        next_run_at: firstSlot(input.schedule ?? null, now),
        created_at: now,
        updated_at: now,
      });
    });
  }

  async update(userId: string, input: UpdateInput): Promise<repo.AutomationRow> {
    const current = await this.get(userId, input.automationId);
    // Only what changes is checked (a model the deployment dropped since keeps the automation editable).
    await this.requireValid(userId, { ...input, outputFormat: input.outputFormat ?? 'markdown', prompt: input.prompt ?? current.prompt });
    const schedule = input.schedule === undefined ? scheduleOf(current) : input.schedule;
    const now = new Date();
    // A new schedule, or one enabled again, starts at its next slot (missed slots are not run).
    const restart = input.schedule !== undefined || (input.enabled === true && !current.enabled);
    const updated = await repo.updateAutomation(this.db, userId, input.automationId, {
      name: input.name,
      prompt: input.prompt,
      ...(input.schedule !== undefined ? { cron: input.schedule?.cron ?? null, timezone: input.schedule?.timezone ?? null } : {}),
      enabled: input.enabled,
      project_id: input.projectId,
      skill_ids: input.skillIds,
      model: input.model,
      output_format: input.outputFormat,
      ...(restart ? { next_run_at: firstSlot(schedule ?? null, now) } : {}),
      updated_at: now,
    });
    if (!updated) throw errors.notFound('Automation not found.');
    return updated;
  }

  async delete(userId: string, automationId: string): Promise<void> {
    if (!(await repo.deleteAutomation(this.db, userId, automationId))) throw errors.notFound('Automation not found.');
  }

  /** Validates a draft (and with `execute`, runs it once, saving nothing). */
  async test(userId: string, input: TestInput): Promise<TestResult> {
    const draft: Draft = { ...input, outputFormat: input.outputFormat ?? 'markdown' };
    const problems = await this.check(userId, draft);
    const scheduleValid = input.schedule && !problems.some((p) => p.field.startsWith('/schedule'));
    const nextRuns = scheduleValid && input.schedule ? nextSlots(input.schedule.cron, input.schedule.timezone, new Date(), NEXT_RUNS) : [];
    let preview: Generated | null = null;
    if (input.execute && problems.length === 0) {
      await this.requireBudgetFor(userId, draft.model ?? null);
      try {
        preview = await this.generate(userId, draft, AbortSignal.timeout(this.runTimeoutMs));
        const { model, usage, connectionId } = preview;
        const at = new Date();
        await this.db
          .transaction()
          .execute((trx) =>
            this.billing.charge(trx, { userId, kind: 'automation.test', resourceId: uuidv7(at.getTime()), model, connectionId, usage, at }),
          );
      } catch (error) {
        if (!(error instanceof RunFailure)) throw error;
        problems.push({ field: error.code === 'invalid_output' ? '/outputFormat' : '/prompt', code: error.code, message: error.message });
      }
    }
    return { problems, nextRuns, preview };
  }

  /** The problems of a draft, one per field: schedule, project, skills and model. */
  async check(userId: string, draft: Draft): Promise<TestError[]> {
    const problems: TestError[] = [];
    if (draft.schedule) {
      const cron = cronProblem(draft.schedule.cron);
      if (cron) problems.push({ field: '/schedule/cron', code: 'invalid_cron', message: cron });
      const timezone = timezoneProblem(draft.schedule.timezone);
      if (timezone) problems.push({ field: '/schedule/timezone', code: 'unknown_timezone', message: timezone });
    }
    if (draft.projectId) {
      const found = await this.projects.get(userId, draft.projectId).catch(notFoundAsNull);
      if (!found) problems.push({ field: '/projectId', code: 'not_found', message: 'No such project of yours.' });
    }
    for (const [i, skillId] of (draft.skillIds ?? []).entries()) {
      const found = await this.skills.get(userId, skillId).catch(notFoundAsNull);
      if (!found) problems.push({ field: `/skillIds/${i}`, code: 'not_found', message: 'No such skill of yours.' });
    }
    const model = draft.model ? await this.models.problem(userId, draft.model, 'chat') : null;
    if (model)
      problems.push({ field: '/model', code: model.gone ? 'not_found' : 'model_not_allowed', message: `The model ${model.message}.` });
    return problems;
  }

  /** Answers a draft's problems as create and update do: 400 (`invalid_cron` for the expression) or 404. */
  private async requireValid(userId: string, draft: Draft): Promise<void> {
    const problems = await this.check(userId, draft);
    const first = problems[0];
    if (!first) return;
    const details = problems.map((p) => ({ path: `/body${p.field}`, message: p.message }));
    if (first.code === 'invalid_cron') throw new ApiError(400, 'invalid_cron', 'The cron expression is not valid.', { details });
    if (first.code === 'not_found' && first.field !== '/model') {
      throw errors.referenceNotFound(first.field.slice(1), first.field === '/projectId' ? 'Project not found.' : 'Skill not found.');
    }
    throw errors.invalidRequest('The automation is not valid.', details);
  }

  /**
   * Runs an automation's prompt once: the project's and skills' instructions and the output
   * format go to the system prompt. Throws RunFailure for the model's failures.
   */
  async generate(userId: string, draft: Draft, signal: AbortSignal): Promise<Generated> {
    // A model that is gone falls back to the default; a blocked one fails the run.
    const model = await this.models
      .resolve(userId, draft.model ?? null, 'chat', { fallback: true, field: '/model' })
      .catch((error: unknown) => {
        throw modelRefused(error);
      });
    const project = draft.projectId ? await this.projects.get(userId, draft.projectId).catch(notFoundAsNull) : null;
    const skills = await Promise.all((draft.skillIds ?? []).map((id) => this.skills.get(userId, id).catch(notFoundAsNull)));
    let system = `You carry out a scheduled task of an AI workspace. ${FORMAT_INSTRUCTIONS[draft.outputFormat]}`;
    if (project?.instructions) system += `\n\nProject "${project.name}" instructions:\n${project.instructions}`;
    for (const skill of skills) if (skill?.instructions) system += `\n\nSkill "${skill.name}":\n${skill.instructions}`;
    const messages: ChatMessage[] = [
      { role: 'system', content: system },
      { role: 'user', content: draft.prompt },
    ];
    let reply;
    try {
      reply = await model.caller.generate({ model: model.providerModelId, messages, signal });
    } catch (error) {
      if (signal.aborted) throw new RunFailure('model_provider_timeout', 'The model did not answer in time.');
      throw new RunFailure('model_provider_error', error instanceof ModelProviderFailure ? error.message : describeProviderError(error));
    }
    if (draft.outputFormat === 'json') {
      try {
        JSON.parse(reply.text);
      } catch {
        throw new RunFailure('invalid_output', 'The reply is not a JSON document.');
      }
    }
    return {
      content: reply.text,
      mimeType: MIME_TYPES[draft.outputFormat],
      usage: reply.usage,
      model: model.info,
      connectionId: model.connectionId,
    };
  }

  /** Queues an explicit run of the caller's automation (enabled or not). */
  async queueRun(userId: string, automationId: string): Promise<RunWithOutputs> {
    const automation = await this.get(userId, automationId);
    await this.requireBudgetFor(userId, automation.model, '/body/automationId');
    const now = new Date();
    const run = await repo.insertRun(this.db, {
      id: uuidv7(now.getTime()),
      automation_id: automation.id,
      owner_user_id: userId,
      status: 'queued',
      trigger: 'manual',
      created_at: now,
    });
    return { run, outputs: [] };
  }

  async getRun(userId: string, runId: string): Promise<RunWithOutputs> {
    const run = await repo.findRun(this.db, userId, runId);
    if (!run) throw errors.notFound('Run not found.');
    return { run, outputs: await repo.outputsOf(this.db, run.output_ids) };
  }

  async listRuns(userId: string, filter: { automationId?: string; status?: repo.RunStatus }, page: PageRequest) {
    if (filter.automationId !== undefined) await this.get(userId, filter.automationId);
    const { items, nextCursor } = await repo.runList.page(this.db, { ownerUserId: userId, ...filter }, page);
    const outputs = await repo.outputsOf(
      this.db,
      items.flatMap((run) => run.output_ids),
    );
    return { items: items.map((run) => ({ run, outputs })), nextCursor };
  }

  /** The draft an automation row describes. */
  /**
   * `402` when nothing is left to spend (or a quota that applies has nothing left) and the model (`modelId`, or the default for a model that
   * is gone) is the deployment's: usage on the user's own key is not charged. `400` for a model
   * that is refused (blocked, or a connection's while `byok` is off).
   */
  async requireBudgetFor(userId: string, modelId: string | null, field = '/body/model'): Promise<void> {
    const model = await this.models.resolve(userId, modelId, 'chat', { fallback: true, field });
    if (model.connectionId !== null) return;
    await this.billing.requireBudget(userId);
    // The quotas that apply must have something left (`402 quota_exceeded`); a run's steps are not
    // known before it runs, so nothing is held: its charge counts toward them in full.
    await this.billing.release(await this.billing.reserve(userId, { model: model.info, usage: { inputTokens: 0, outputTokens: 0 } }));
  }

  draftOf(row: repo.AutomationRow): Draft {
    return {
      prompt: row.prompt,
      schedule: scheduleOf(row),
      projectId: row.project_id,
      skillIds: row.skill_ids,
      model: row.model,
      outputFormat: row.output_format as OutputFormat,
    };
  }
}

function scheduleOf(row: repo.AutomationRow): Draft['schedule'] {
  return row.cron && row.timezone ? { cron: row.cron, timezone: row.timezone } : null;
}

/** The first slot of a schedule after `now`, or null without one. */
function firstSlot(schedule: Draft['schedule'], now: Date): Date | null {
  return schedule ? (nextSlots(schedule.cron, schedule.timezone, now, 1)[0] ?? null) : null;
}

function notFoundAsNull(error: unknown): null {
  if (error instanceof ApiError && error.status === 404) return null;
  throw error;
}

/** A model refused when a run starts (blocked, or its connection switched off) as the run's failure. */
export function modelRefused(error: unknown): unknown {
  if (!(error instanceof ApiError) || error.code !== 'invalid_request') return error;
  const detail = (error.extras.details as Array<{ message?: string }> | undefined)?.[0]?.message;
  return new RunFailure('model_provider_error', `${error.message}${detail ? ` (${detail})` : ''}`);
}
