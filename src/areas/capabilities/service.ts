import type { components } from '../../../generated/api';
import type { CapabilityName } from '../../platform/errors';
import type { Database } from '../../platform/db';
import type { Actor, AuditService } from '../audit/service';
import * as repo from './repository';

export const UPDATE_ACTION = 'administration.capability.update';

export type Capabilities = components['schemas']['Capabilities'];
type Flags = Record<CapabilityName, boolean>;

export interface CapabilityDefaults extends Flags {
  /** The payment provider when billing is on. */
  billingProvider: Capabilities['billingProvider'];
  /** How long a read of the stored flags is reused; every instance sees a change within this time. */
  cacheMs: number;
}

export const CAPABILITY_NAMES: readonly CapabilityName[] = [
  'automations',
  'billing',
  'vectorSearch',
  'byok',
  'mcp',
  'integrations',
  'openaiApi',
  'mcpServer',
];

/** What a CapabilityService is built from. */
export interface CapabilityServiceDeps {
  db: Database;
  audit: AuditService;
  defaults: CapabilityDefaults;
  now?: () => number;
  /** Whether the database can do vector search at all (pgvector); the flag alone is not enough. */
  vectorAvailable?: boolean;
}

/**
 * Runtime capability flags: stored in the database (so every instance agrees), defaulting to the
 * configuration, read through a short cache.
 */
export class CapabilityService {
  private cached: { flags: Flags; until: number } | null = null;
  private pending: Promise<Flags> | null = null;

  private readonly db: Database;
  private readonly audit: AuditService;
  private readonly defaults: CapabilityDefaults;
  private readonly now: () => number;
  private readonly vectorAvailable: boolean;

  constructor({ db, audit, defaults, now = Date.now, vectorAvailable = true }: CapabilityServiceDeps) {
    this.db = db;
    this.audit = audit;
    this.defaults = defaults;
    this.now = now;
    this.vectorAvailable = vectorAvailable;
  }

  /**
   * The capabilities as clients see them: `vectorSearch` only where the database has pgvector.
   * Inside a transaction pass it as `db`, so that a reload does not wait for another connection
   * (the embedded database has only one).
   */
  async current(db?: Database): Promise<Capabilities> {
    const flags = await this.flags(db);
    return {
      ...flags,
      vectorSearch: flags.vectorSearch && this.vectorAvailable,
      billingProvider: flags.billing ? this.defaults.billingProvider : 'none',
    };
  }

  async isEnabled(name: CapabilityName): Promise<boolean> {
    return (await this.flags())[name];
  }

  /**
   * Stores flags (an administrative switch), audited in the same transaction, and drops this
   * instance's cached copy; other instances see the change when their cache expires.
   */
  async update(actor: Actor, changes: Partial<Flags>): Promise<Capabilities> {
    const names = CAPABILITY_NAMES.filter((name) => changes[name] !== undefined);
    await this.db.transaction().execute(async (trx) => {
      for (const name of names) await repo.upsertCapability(trx, name, changes[name] as boolean, actor.userId);
      await this.audit.record(
        actor,
        { action: UPDATE_ACTION, resourceType: 'capability', resourceId: names.join(','), outcome: 'success', metadata: { changes } },
        trx,
      );
    });
    this.cached = null;
    return this.current();
  }

  private async flags(db?: Database): Promise<Flags> {
    if (this.cached && this.cached.until > this.now()) return this.cached.flags;
    if (db) return this.load(db);
    this.pending ??= this.load(this.db).finally(() => {
      this.pending = null;
    });
    return this.pending;
  }

  private async load(db: Database): Promise<Flags> {
    const flags: Flags = {
      automations: this.defaults.automations,
      billing: this.defaults.billing,
      vectorSearch: this.defaults.vectorSearch,
      byok: this.defaults.byok,
      mcp: this.defaults.mcp,
      integrations: this.defaults.integrations,
      openaiApi: this.defaults.openaiApi,
      mcpServer: this.defaults.mcpServer,
    };
    for (const row of await repo.listCapabilityRows(db)) {
      if ((CAPABILITY_NAMES as readonly string[]).includes(row.name)) flags[row.name as CapabilityName] = row.enabled;
    }
    this.cached = { flags, until: this.now() + this.defaults.cacheMs };
    return flags;
  }
}
