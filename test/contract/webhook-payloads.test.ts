import type { components } from '../../generated/api';
import { WEBHOOK_EVENT_SCHEMAS } from '../../src/areas/webhooks/events';
import { loadApiDocument } from '../../src/http/openapi';
import { type TestUser, useHarnessWith } from '../helpers/harness';
import { useFakeModelAndReceiver } from '../helpers/openai-server';
import { eventually, type Received, subscribe, verify } from '../helpers/receiver';

/**
 * Every event type the service sends is a key of WEBHOOK_EVENT_SCHEMAS, which the compiler holds to
 * the generated `WebhookEvent` union and `emitEvent` takes its payload types from. Here the document
 * maps each to the same schema, and real deliveries of each type match it: the delivery log shows
 * the delivered bytes as `event`, and the harness validates every answer against the document.
 */
type WebhookEvent = components['schemas']['WebhookEvent'];
const doc = loadApiDocument();
const schemas = doc.components!.schemas as Record<
  string,
  { oneOf?: unknown[]; discriminator?: { propertyName: string; mapping?: Record<string, string> }; enum?: string[] }
>;
const eventTypes = Object.keys(WEBHOOK_EVENT_SCHEMAS) as Array<keyof typeof WEBHOOK_EVENT_SCHEMAS>;
const selectable = eventTypes.filter((type) => type !== 'webhook.test');

const servers = useFakeModelAndReceiver();
const ctx = useHarnessWith(
  () => ({
    MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
    MODEL_PROVIDER_MODELS: 'test-model:100:200',
    MODEL_PROVIDER_IMAGE_MODELS: 'gpt-image-1=4',
    AUTOMATION_POLL_INTERVAL_MS: '20',
    AUTOMATION_TICK_CRON: '0 0 0 1 1 *',
    WEBHOOK_ALLOW_LOOPBACK: 'true',
    WEBHOOK_POLL_INTERVAL_MS: '20',
    // Only a broken receiver reaches these on a loaded machine; a slow attempt is retried soon.
    WEBHOOK_TIMEOUT_MS: '60000',
    WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s,1s,1s',
  }),
  'alice',
);

describe('webhook payloads', () => {
  test('each event type the service sends has its own schema in the WebhookEvent union, and is selectable', () => {
    const union = schemas.WebhookEvent!;
    const mapping = union.discriminator?.mapping ?? {};
    expect(union.discriminator?.propertyName).toBe('type');
    const problems: string[] = [];
    for (const [type, name] of Object.entries(WEBHOOK_EVENT_SCHEMAS)) {
      if (mapping[type] !== `#/components/schemas/${name}`)
        problems.push(`${type} is sent with ${name} but WebhookEvent's discriminator maps it to ${mapping[type]}`);
    }
    for (const [type, ref] of Object.entries(mapping)) {
      if (!(type in WEBHOOK_EVENT_SCHEMAS)) problems.push(`${type} has a schema in WebhookEvent but is not in WEBHOOK_EVENT_SCHEMAS`);
      if (!(union.oneOf as Array<{ $ref: string }>).some((variant) => variant.$ref === ref))
        problems.push(`${ref} (${type}) is mapped but not one of WebhookEvent's oneOf`);
    }
    expect(problems).toEqual([]);
    expect([...schemas.WebhookEventType!.enum!].sort()).toEqual([...selectable].sort());
  });

  test('a real delivery of each type matches its schema', async () => {
    const user: TestUser = ctx.alice;
    const { subscription, secret } = await subscribe(ctx.h, user, `${servers.receiver.url}/all`, selectable);
    const delivered = (type: string) =>
      eventually(() => servers.receiver.received.find((r) => r.path === '/hook/all' && verify(secret, r).type === type));

    // chat.completed and chat.failed, from real chat turns.
    const created = await ctx.h.http().post('/api/v1/conversations').set(user.auth).send({});
    const conversationId = created.body.conversation.conversationId as string;
    servers.model.behaviour = () => ({ kind: 'reply', chunks: ['Hello', ' there.'] });
    const first = await ctx.h.http().post('/api/v1/conversations/messages').set(user.auth).send({ conversationId, content: 'Hi' });
    expect(first.status).toBe(200);
    // message.feedback, from feedback on that reply.
    const replyId = first.body.reply.messageId as string;
    const rated = await ctx.h
      .http()
      .post('/api/v1/conversations/messages/feedback')
      .set(user.auth)
      .send({ messageId: replyId, rating: 'down', reason: 'inaccurate' });
    expect(rated.status).toBe(200);
    servers.model.behaviour = () => ({ kind: 'error', status: 500, message: 'upstream overloaded' });
    expect(
      (await ctx.h.http().post('/api/v1/conversations/messages').set(user.auth).send({ conversationId, content: 'Again' })).status,
    ).toBe(502);

    // approval.requested, from a turn whose model calls a tool that needs approval.
    servers.model.behaviour = () => ({
      kind: 'tool-calls',
      calls: [{ id: 'call_1', name: 'notes_create', arguments: '{"title":"T","content":"C"}' }],
    });
    const paused = await ctx.h.http().post('/api/v1/conversations/messages').set(user.auth).send({ conversationId, content: 'Note it' });
    expect(paused.body.reply.status).toBe('awaiting_approval');

    // automation.finished and automation.failed, from real runs.
    const automation = await ctx.h
      .http()
      .post('/api/v1/automations')
      .set(user.auth)
      .send({ name: 'Briefing', prompt: 'Summarize my notes.' });
    const automationId = automation.body.automation.automationId as string;
    servers.model.behaviour = () => ({ kind: 'reply', chunks: ['- Done.'] });
    expect((await ctx.h.http().post('/api/v1/automations/run').set(user.auth).send({ automationId })).status).toBe(200);
    await delivered('automation.finished');
    servers.model.behaviour = () => ({ kind: 'error', status: 500, message: 'upstream overloaded' });
    expect((await ctx.h.http().post('/api/v1/automations/run').set(user.auth).send({ automationId })).status).toBe(200);

    // media.completed and media.failed, from real media calls.
    const images = await ctx.h.http().post('/api/v1/media/images').set(user.auth).send({ prompt: 'A boat' });
    expect(images.status).toBe(200);
    servers.model.media.behaviour = { kind: 'error', status: 500, message: 'upstream overloaded' };
    const failedImages = await ctx.h.http().post('/api/v1/media/images').set(user.auth).send({ prompt: 'Another boat' });
    expect(failedImages.status).toBe(502);
    servers.model.media.behaviour = { kind: 'ok' };

    // usage.threshold_reached, from a reply that takes a model quota (1 cent, threshold 1%) past its threshold.
    const quotas = ctx.h.runtime.services.quotas;
    const quota = await quotas.create(
      { userId: user.userId, requestId: null },
      { model: 'test-model', period: 'month', limitCents: 1, thresholdPercent: 1 },
    );
    servers.model.behaviour = () => ({ kind: 'reply', chunks: ['Counted.'], usage: { prompt: 1000, completion: 0 } });
    const counted = await ctx.h.http().post('/api/v1/conversations').set(user.auth).send({ title: 'Counted' });
    expect(
      (
        await ctx.h
          .http()
          .post('/api/v1/conversations/messages')
          .set(user.auth)
          .send({ conversationId: counted.body.conversation.conversationId, content: 'Count' })
      ).status,
    ).toBe(200);
    await quotas.delete({ userId: user.userId, requestId: null }, quota.id);

    // webhook.test, from the test operation.
    const test = await ctx.h.http().post('/api/v1/webhooks/test').set(user.auth).send({ subscriptionId: subscription.subscriptionId });
    expect(test.status).toBe(200);

    const requests: Received[] = [];
    // Each type the service sends, from the flows above: a type added without one never arrives.
    for (const type of eventTypes) requests.push(await delivered(type));
    for (const request of requests) {
      const payload = verify(secret, request) as unknown as WebhookEvent;
      // The delivery log shows the delivered event; the harness validates the answer against the document.
      const log = await ctx.h
        .http()
        .get('/api/v1/webhooks/deliveries')
        .query({ subscriptionId: subscription.subscriptionId, limit: 200 })
        .set(user.auth);
      expect(log.status).toBe(200);
      const entry = (log.body.deliveries as Array<{ eventId: string; event: unknown }>).find((d) => d.eventId === payload.id);
      expect(entry?.event).toEqual(JSON.parse(request.body));
      // The generated union narrows on `type`: each branch reads its own `data`.
      switch (payload.type) {
        case 'chat.completed':
          expect(payload.data).toMatchObject({
            conversationId,
            model: 'test-model',
            content: 'Hello there.',
            usage: { inputTokens: 10, outputTokens: 5 },
          });
          break;
        case 'chat.failed':
          expect(payload.data).toMatchObject({ conversationId, model: 'test-model', errorCode: 'model_provider_error' });
          break;
        case 'automation.finished':
          expect(payload.data).toMatchObject({ automationId, trigger: 'manual', scheduledFor: null, outputIds: [expect.any(String)] });
          break;
        case 'automation.failed':
          expect(payload.data).toMatchObject({ automationId, trigger: 'manual', errorCode: 'model_provider_error' });
          break;
        case 'approval.requested':
          expect(payload.data).toMatchObject({
            conversationId,
            toolName: 'notes_create',
            arguments: { title: 'T', content: 'C' },
            argumentsDigest: expect.stringMatching(/^[0-9a-f]{64}$/),
          });
          break;
        case 'media.completed':
          expect(payload.data).toEqual({
            generationId: images.body.generationId,
            operation: 'image_generation',
            model: 'gpt-image-1',
            connectionId: null,
            outputIds: [images.body.outputs[0].outputId],
            usage: { unit: 'image', units: 1, inputTokens: 12, outputTokens: 272, costCents: 4 },
          });
          break;
        case 'media.failed':
          expect(payload.data).toEqual({
            generationId: failedImages.body.generationId,
            operation: 'image_generation',
            model: 'gpt-image-1',
            connectionId: null,
            errorCode: 'model_provider_error',
            error: 'The model provider answered 500: upstream overloaded',
          });
          break;
        case 'message.feedback':
          expect(payload.data).toEqual({
            feedbackId: rated.body.feedback.feedbackId,
            conversationId,
            messageId: replyId,
            model: 'test-model',
            rating: 'down',
            reason: 'inaccurate',
            comment: null,
          });
          break;
        case 'usage.threshold_reached':
          expect(payload.data).toMatchObject({
            quotaId: quota.id,
            groupId: null,
            model: 'test-model',
            limitCents: 1,
            spentCents: 0.1,
            thresholdPercent: 1,
            userId: user.userId,
          });
          break;
        case 'webhook.test':
          expect(payload.data).toEqual({ subscriptionId: subscription.subscriptionId });
          break;
        default: {
          const unchecked: never = payload;
          throw new Error(`no check for ${JSON.stringify(unchecked)}`);
        }
      }
    }
  });
});
