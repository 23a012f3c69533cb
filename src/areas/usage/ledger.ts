import type { Transaction } from 'kysely';
import type { ChatUsage, ModelInfo } from '../../platform/ai/models';
import type { DB } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';

/** The charged actions: a chat reply, an automation's run and its dry run. */
export type UsageKind = 'chat.reply' | 'automation.run' | 'automation.test';

/** Cost in millionths of a cent: tokens × the model's cents per million tokens, exactly. */
export function costMicroCents(model: ModelInfo, usage: ChatUsage): number {
  return usage.inputTokens * model.inputCentsPerMillionTokens + usage.outputTokens * model.outputCentsPerMillionTokens;
}

/**
 * Writes what a charged action consumed to the usage ledger, in the transaction that records the
 * action's outcome; returns its cost in millionths of a cent.
 */
export async function recordUsage(
  trx: Transaction<DB>,
  entry: { userId: string; kind: UsageKind; resourceId: string; model: ModelInfo; usage: ChatUsage; at: Date },
): Promise<number> {
  const cost = costMicroCents(entry.model, entry.usage);
  await trx
    .insertInto('usage_records')
    .values({
      id: uuidv7(entry.at.getTime()),
      user_id: entry.userId,
      kind: entry.kind,
      resource_id: entry.resourceId,
      model: entry.model.id,
      input_tokens: entry.usage.inputTokens,
      output_tokens: entry.usage.outputTokens,
      cost_micro_cents: cost,
      created_at: entry.at,
    })
    .execute();
  return cost;
}
