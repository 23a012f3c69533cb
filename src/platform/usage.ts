/** What a model call used: its price and its JSON form, shared by chat replies, automation runs and billing. */
import type { ChatUsage, ModelInfo } from './ai/models';
import type { Schemas } from './api-types';

/** Cost in millionths of a cent: tokens × the model's cents per million tokens, exactly. */
export function costMicroCents(model: ModelInfo, usage: ChatUsage): number {
  return usage.inputTokens * model.inputCentsPerMillionTokens + usage.outputTokens * model.outputCentsPerMillionTokens;
}

/** Tokens and cost as the API and webhook events show them (the spec's `Usage`; cost in cents, fractional). */
export type UsageJson = NonNullable<Schemas['Usage']>;

export function presentUsage(usage: ChatUsage, costMicroCents: number): UsageJson {
  return { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, costCents: costMicroCents / 1e6 };
}

/** The usage a reply or run row recorded, or null before it finished (or when it failed). */
export function presentRecordedUsage(row: {
  input_tokens: number | null;
  output_tokens: number | null;
  cost_micro_cents: number | null;
}): UsageJson | null {
  if (row.input_tokens === null || row.output_tokens === null || row.cost_micro_cents === null) return null;
  return presentUsage({ inputTokens: row.input_tokens, outputTokens: row.output_tokens }, row.cost_micro_cents);
}

/**
 * The most output tokens a call that holds a quota reservation may write: the output part of the
 * reservation's bound, and the call's `maxOutputTokens` unless it asks for fewer.
 */
export const RESERVED_OUTPUT_TOKENS = 4096;

/** An upper estimate of a prompt's tokens, for a reservation: a token per character of its JSON text (image bytes left out). */
export function promptTokenBound(messages: unknown): number {
  return JSON.stringify(messages, (_key, value: unknown) => (value instanceof Uint8Array ? '' : value)).length;
}
