import type { Database } from '../../platform/db';

export function completedSteps(db: Database, userId: string) {
  return db.selectFrom('onboarding_steps').select(['step', 'completed_at']).where('user_id', '=', userId).execute();
}

/** Marks the steps complete; a step already marked keeps its first time. */
export async function markCompleted(db: Database, userId: string, steps: readonly string[], at: Date): Promise<void> {
  if (steps.length === 0) return;
  await db
    .insertInto('onboarding_steps')
    .values(steps.map((step) => ({ user_id: userId, step, completed_at: at })))
    .onConflict((oc) => oc.columns(['user_id', 'step']).doNothing())
    .execute();
}

export async function clearCompleted(db: Database, userId: string, step?: string): Promise<void> {
  let query = db.deleteFrom('onboarding_steps').where('user_id', '=', userId);
  if (step !== undefined) query = query.where('step', '=', step);
  await query.execute();
}
