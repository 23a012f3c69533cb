import type { ChatUsage } from '../../platform/ai/models';

/** Tokens and cost as the API and webhook events show them (cost in cents, fractional). */
export interface UsageJson {
  inputTokens: number;
  outputTokens: number;
  costCents: number;
}

export function presentUsage(usage: ChatUsage, costMicroCents: number): UsageJson {
  return { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, costCents: costMicroCents / 1e6 };
}

/** The usage a reply or run row recorded, or null before it finished (or when it failed). */
export function presentRecordedUsage(row: { input_tokens: number | null; output_tokens: number | null; cost_micro_cents: number | null }): UsageJson | null {
  if (row.input_tokens === null || row.output_tokens === null || row.cost_micro_cents === null) return null;
  return presentUsage({ inputTokens: row.input_tokens, outputTokens: row.output_tokens }, row.cost_micro_cents);
}
