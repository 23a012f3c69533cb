import type { Database } from '../../platform/db';
import type { Notifications } from '../../platform/db/notifications';
import type { AuditService } from '../audit/service';
import type { BudgetGate } from '../billing/service';
import type { KnowledgeService } from '../knowledge/service';
import type { MemoryService } from '../memory/service';
import type { ModelService } from '../models/service';
import type { ProjectService } from '../projects/service';
import type { SettingsService } from '../settings/service';
import type { SkillService } from '../skills/service';
import type { ToolService } from '../tools/service';
import type { WebhookService } from '../webhooks/service';
import { ApprovalService } from './approvals';
import { type AttachmentLimits, Attachments, type AttachmentsDeps } from './attachments';
import { Grounder, type GroundingOutcome } from './grounding';
import { ReplyLeases, type ReplyLeaseSettings } from './leases';
import { TurnContexts } from './prompt';
import { ReplyWatch } from './reply-watch';
import { ReplyWrites } from './reply-writes';
import type { ConversationService } from './service';
import type { ChatObserver, ChatToolSettings } from './turn';
import { ConversationTitler } from './titles';
import { TurnSteps } from './steps';
import { TurnEngine } from './turn-engine';

/** What chat is built from: the conversations it runs turns in, and the tools they may call. */
export interface ChatDeps {
  db: Database;
  /** Stop requests and new stream events between instances. */
  notifications: Notifications;
  conversations: Pick<ConversationService, 'get' | 'message'>;
  /** The skills chat turns apply. */
  skills: Pick<SkillService, 'forChat'>;
  models: Pick<ModelService, 'resolve' | 'resolver'>;
  projects: Pick<ProjectService, 'get'>;
  memory: Pick<MemoryService, 'relevant'>;
  /** Grounded turns retrieve the caller's knowledge through it. */
  knowledge: Pick<KnowledgeService, 'passages'>;
  /** The caller's `knowledgeInChat`, `memoryInChat` and `autoTitles`. */
  settings: Pick<SettingsService, 'get'>;
  /** The files messages attach are read through it, as the caller. */
  files: AttachmentsDeps['files'];
  attachmentLimits: AttachmentLimits;
  /** The tool registry: the caller's tools for each turn. */
  tools: Pick<ToolService, 'forTurn'>;
  billing: BudgetGate;
  webhooks: Pick<WebhookService, 'emitEvent'>;
  audit: Pick<AuditService, 'record'>;
  /** How long a model call may take. */
  timeoutMs: number;
  lease: ReplyLeaseSettings;
  toolSettings: ChatToolSettings;
  /** Logs at warn level (a failed knowledge retrieval). */
  warn: (message: string, meta: Record<string, unknown>) => void;
  /** Called once per grounded turn (metrics). */
  onGrounded: (outcome: GroundingOutcome, sources: number) => void;
  observer: ChatObserver;
}

/**
 * Chat: the turns of conversations, the approvals their tool calls wait for, and the leases of the
 * replies this instance is generating. Each reply's final state is written with its usage in the
 * usage ledger and its `chat.completed` / `chat.failed` in the webhook outbox, in one transaction.
 */
export interface Chat {
  turns: TurnEngine;
  approvals: ApprovalService;
  leases: ReplyLeases;
  /** The model-written titles of conversations, after their first exchange. */
  titles: ConversationTitler;
  /** Replies' streams across instances: their stored events, their watchers, and stopping them. */
  watch: ReplyWatch;
}

export function createChat(deps: ChatDeps): Chat {
  const { db, billing, webhooks, observer } = deps;
  const leases = new ReplyLeases({ db, webhooks, lease: deps.lease });
  const titles = new ConversationTitler({
    db,
    models: deps.models,
    settings: deps.settings,
    billing,
    timeoutMs: deps.timeoutMs,
    warn: deps.warn,
  });
  const writes = new ReplyWrites({ db, billing, webhooks, leaseMs: deps.lease.leaseMs, approvalTtlMs: deps.toolSettings.approvalTtlMs });
  const turns = new TurnEngine({
    db,
    models: deps.models,
    conversations: deps.conversations,
    skills: deps.skills,
    billing,
    contexts: new TurnContexts({
      db,
      projects: deps.projects,
      memory: deps.memory,
      tools: deps.tools,
      toolsEnabled: deps.toolSettings.enabled,
    }),
    grounder: new Grounder({ knowledge: deps.knowledge, settings: deps.settings, warn: deps.warn, onGrounded: deps.onGrounded }),
    attachments: new Attachments({ files: deps.files, limits: deps.attachmentLimits }),
    writes,
    leases,
    steps: new TurnSteps({ timeoutMs: deps.timeoutMs, maxSteps: deps.toolSettings.maxSteps, writes, observer, billing: deps.billing }),
    titles,
  });
  const approvals = new ApprovalService({ db, audit: deps.audit, webhooks, leases, turns, observer });
  const watch = new ReplyWatch({ db, notifications: deps.notifications, leases, log: deps.warn });
  return { turns, approvals, leases, titles, watch };
}
