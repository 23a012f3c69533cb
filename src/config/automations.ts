import cron from 'node-cron';
import { topic, variable } from './declare';
import { duration, durations, int, scaled, text } from './kinds';

/** Automations (src/areas/automations), agent environments (src/areas/agents) and webhook deliveries (src/areas/webhooks). */
export const automations = topic('Automations, agents and webhooks', {
  automations: {
    tickCron: variable(
      'AUTOMATION_TICK_CRON',
      text().refine((expression) => cron.validate(expression), {
        error: (issue) => `must be a cron expression such as */10 * * * * * (got "${String(issue.input)}")`,
      }),
      {
        default: '*/10 * * * * *',
        accepts: 'node-cron expression',
        doc: 'how often each instance looks for due schedule slots (seconds field allowed)',
      },
    ),
    pollIntervalMs: variable('AUTOMATION_POLL_INTERVAL_MS', int(10, 60_000), {
      default: '1000',
      doc: 'how often each instance looks for queued runs',
    }),
    runTimeoutMs: variable('AUTOMATION_RUN_TIMEOUT_MS', int(100, 3_600_000), { default: '300000', doc: 'the longest a run may take' }),
    maxConcurrentRunsPerUser: variable('AUTOMATION_MAX_CONCURRENT_RUNS', int(1, 100), {
      default: '2',
      doc: 'runs of one user running at once, across instances',
    }),
  },
  agents: {
    offlineAfterMs: variable('AGENT_OFFLINE_AFTER_MS', int(1000, 3_600_000), {
      default: '90000',
      doc: 'an agent environment without a heartbeat for this long is `offline`',
    }),
    commandLeaseMs: variable('AGENT_COMMAND_LEASE_MS', int(100, 3_600_000), {
      default: '60000',
      doc: "how long a heartbeat's claim on a command lasts before it returns to the queue",
    }),
  },
  webhooks: {
    timeoutMs: variable('WEBHOOK_TIMEOUT_MS', int(100, 60_000), {
      default: '10000',
      doc: 'one delivery attempt, from resolving the host to the end of the answer',
    }),
    retryScheduleMs: variable('WEBHOOK_RETRY_SCHEDULE', durations(20), {
      default: '5s,5m,30m,2h,5h,10h,10h',
      doc: 'delays before the 2nd, 3rd… attempt (one attempt more than delays)',
    }),
    disableAfterMs: variable('WEBHOOK_DISABLE_AFTER', duration(), {
      default: '5d',
      doc: 'a subscription whose attempts all fail for this long is disabled',
    }),
    pollIntervalMs: variable('WEBHOOK_POLL_INTERVAL_MS', int(10, 60_000), {
      default: '1000',
      doc: 'how often each instance looks for due deliveries',
    }),
    concurrency: variable('WEBHOOK_CONCURRENCY', int(1, 256), {
      default: '32',
      doc: 'attempts in flight per instance (each waits on its receiver, not on this process)',
    }),
    retentionMs: variable('WEBHOOK_LOG_RETENTION_DAYS', scaled(1, 3650, 86_400_000), {
      default: '30',
      doc: 'finished deliveries are kept this many days',
    }),
  },
});
