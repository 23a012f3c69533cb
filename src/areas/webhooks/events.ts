import type { components } from '../../../generated/api';

type Schemas = components['schemas'];

/** An event as delivered: the document's `WebhookEvent` union, discriminated by `type`. */
export type WebhookEvent = Schemas['WebhookEvent'];
/** Every type an event can have: the kinds a subscription selects, and `webhook.test`. */
export type AnyWebhookEventType = WebhookEvent['type'];
/** The kinds a subscription selects (`WebhookEventType` in the document); each is one of the types above. */
export type WebhookEventType = Schemas['WebhookEventType'];

/** The name of the document's schema whose `type` is `T`. */
type SchemaNameOf<T extends AnyWebhookEventType> = {
  [K in keyof Schemas]: Schemas[K] extends { type: T; data: unknown } ? K : never;
}[keyof Schemas];

/**
 * Each event type the service sends, and the name of its payload's schema in the document. The
 * compiler holds this to the generated `WebhookEvent` union: a type left out or added, or a type
 * named with another type's schema, fails to compile.
 */
export const WEBHOOK_EVENT_SCHEMAS = {
  'chat.completed': 'WebhookEventChatCompleted',
  'chat.failed': 'WebhookEventChatFailed',
  'automation.finished': 'WebhookEventAutomationFinished',
  'automation.failed': 'WebhookEventAutomationFailed',
  'approval.requested': 'WebhookEventApprovalRequested',
  'media.completed': 'WebhookEventMediaCompleted',
  'media.failed': 'WebhookEventMediaFailed',
  'message.feedback': 'WebhookEventMessageFeedback',
  'usage.threshold_reached': 'WebhookEventUsageThresholdReached',
  'webhook.test': 'WebhookEventTest',
} as const satisfies { [T in AnyWebhookEventType]: SchemaNameOf<T> };

/** The `data` of an event of type `T`, as its generated schema has it. */
export type WebhookEventData<T extends AnyWebhookEventType> = Schemas[(typeof WEBHOOK_EVENT_SCHEMAS)[T]]['data'];

/** The exact body every attempt of an event sends: `{ id, type, createdAt, data }`. */
export function eventBody<T extends AnyWebhookEventType>(id: string, type: T, createdAt: Date, data: WebhookEventData<T>): string {
  return JSON.stringify({ id, type, createdAt: createdAt.getTime(), data });
}
