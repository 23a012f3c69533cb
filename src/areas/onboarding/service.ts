import { errors } from '../../platform/errors';
import type { Database } from '../../platform/db';
import type { FileService } from '../files/service';
import type { ProjectService } from '../projects/service';
import type { SettingsService } from '../settings/service';
import * as repo from './repository';

/** The deployment's steps when it names none. */
export const DEFAULT_ONBOARDING_STEPS = ['profile', 'model', 'first_project', 'first_file'] as const;

export interface OnboardingStep {
  step: string;
  done: boolean;
  doneBy: 'completed' | 'data' | null;
  completedAt: Date | null;
}

export interface OnboardingState {
  steps: OnboardingStep[];
  completed: boolean;
}

/** What the data steps read, through the other areas' services. */
export interface OnboardingDeps {
  db: Database;
  /** The deployment's steps, in order. */
  steps: readonly string[];
  projects: Pick<ProjectService, 'hasAny'>;
  files: Pick<FileService, 'hasStoredFile'>;
  settings: Pick<SettingsService, 'hasChosenModel'>;
}

/**
 * A user's walk through the deployment's first-run steps: a step is done when the user marked it
 * complete, and a data step also when the user's data shows it.
 */
export class OnboardingService {
  /** The steps whose user data counts, and how it is read. */
  private readonly dataChecks: Record<string, (userId: string) => Promise<boolean>>;

  constructor(private readonly deps: OnboardingDeps) {
    this.dataChecks = {
      first_project: (userId) => deps.projects.hasAny(userId),
      first_file: (userId) => deps.files.hasStoredFile(userId),
      model: (userId) => deps.settings.hasChosenModel(userId),
    };
  }

  async state(userId: string): Promise<OnboardingState> {
    const marks = new Map((await repo.completedSteps(this.deps.db, userId)).map((row) => [row.step, row.completed_at]));
    const steps = await Promise.all(
      this.deps.steps.map(async (step): Promise<OnboardingStep> => {
        const completedAt = marks.get(step) ?? null;
        if (completedAt) return { step, done: true, doneBy: 'completed', completedAt };
        const check = this.dataChecks[step];
        const shown = check ? await check(userId) : false;
        return { step, done: shown, doneBy: shown ? 'data' : null, completedAt: null };
      }),
    );
    return { steps, completed: steps.every((s) => s.done) };
  }

  /** Marks one step, or every step, complete (exactly one of the two). */
  async complete(userId: string, request: { step?: string; all?: boolean }): Promise<OnboardingState> {
    if ((request.step === undefined) === (request.all === undefined)) {
      throw errors.invalidRequest('Send either step or all.', [{ path: '/body', message: 'must have exactly one of step and all' }]);
    }
    const steps = request.step !== undefined ? [this.known(request.step)] : this.deps.steps;
    await repo.markCompleted(this.deps.db, userId, steps, new Date());
    return this.state(userId);
  }

  /** Clears the completion mark of one step, or of every step. */
  async reset(userId: string, step?: string): Promise<OnboardingState> {
    await repo.clearCompleted(this.deps.db, userId, step === undefined ? undefined : this.known(step));
    return this.state(userId);
  }

  private known(step: string): string {
    if (!this.deps.steps.includes(step)) {
      throw errors.invalidRequest(`"${step}" is not an onboarding step of this deployment.`, [
        { path: '/body/step', message: `must be one of ${this.deps.steps.join(', ')}` },
      ]);
    }
    return step;
  }
}
