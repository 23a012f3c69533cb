import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Schemas } from '../../platform/api-types';
import { type ErrorDetail, errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import type { Database } from '../../platform/db';
import { lockForTransaction } from '../../platform/db/locks';
import { uuidv7 } from '../../platform/ids';
import { isWithin, normalizePath, pathsNamed, pathStyle } from './paths';
import * as repo from './repository';

/** The agent protocol versions this deployment speaks. */
export const SUPPORTED_PROTOCOL_VERSIONS: readonly number[] = [1];
const MAX_ENVIRONMENTS_PER_USER = 50;
const MAX_WAITING_COMMANDS = 1000;
const CLAIMS_PER_HEARTBEAT = 50;
const MAX_PAYLOAD_BYTES = 128 * 1024;
const DEFAULT_COMMAND_TTL_SECONDS = 3600;

export interface AgentSettings {
  offlineAfterMs: number;
  commandLeaseMs: number;
}

export type FilesystemGrant = Schemas['FilesystemGrant'];

const hashCredential = (credential: string) => createHash('sha256').update(credential, 'utf8').digest();

function requireProtocol(version: number): void {
  if (!SUPPORTED_PROTOCOL_VERSIONS.includes(version)) throw errors.unsupportedProtocolVersion(version, SUPPORTED_PROTOCOL_VERSIONS);
}

/**
 * Remote agent environments: registration with a credential shown once, heartbeats that keep
 * them online and claim their commands with a lease (a lapsed lease returns the command to the
 * queue under the same id: delivered at least once), acknowledgements that settle a claimed
 * command exactly once, and the filesystem grant every command's paths must fall inside.
 */
export class AgentEnvironmentService {
  constructor(
    private readonly db: Database,
    readonly settings: AgentSettings,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async get(userId: string, environmentId: string, db: Database = this.db): Promise<repo.EnvironmentRow> {
    const row = await repo.findEnvironment(db, userId, environmentId, this.now());
    if (!row) throw errors.notFound('Agent environment not found.');
    return row;
  }

  async list(userId: string, page: PageRequest) {
    const { items, nextCursor } = await repo.environmentList.page(this.db, { ownerUserId: userId, now: this.now() }, page);
    return { items: items.map((row) => ({ ...row, pending_commands: Number(row.pending_commands ?? 0) })), nextCursor };
  }

  async register(userId: string, input: { name: string; platform: string; protocolVersion: number }) {
    requireProtocol(input.protocolVersion);
    const credential = `aenv_${randomBytes(32).toString('base64url')}`;
    const now = this.now();
    const id = uuidv7(now.getTime());
    const environment = await this.db.transaction().execute(async (trx) => {
      await lockForTransaction(trx, `agents:${userId}`);
      if ((await repo.countEnvironments(trx, userId)) >= MAX_ENVIRONMENTS_PER_USER) {
        throw errors.conflict(`A user may register at most ${MAX_ENVIRONMENTS_PER_USER} environments; delete one first.`);
      }
      await repo.insertEnvironment(trx, {
        id,
        owner_user_id: userId,
        name: input.name,
        platform: input.platform,
        protocol_version: input.protocolVersion,
        credential_hash: hashCredential(credential).toString('hex'),
        created_at: now,
        updated_at: now,
      });
      return this.get(userId, id, trx);
    });
    return { environment, credential };
  }

  async delete(userId: string, environmentId: string): Promise<void> {
    if (!(await repo.deleteEnvironment(this.db, userId, environmentId))) throw errors.notFound('Agent environment not found.');
  }

  /** The caller's environment, if `credential` is its credential: 404 before 403. */
  private async authenticate(userId: string, environmentId: string, credential: string, db: Database): Promise<repo.EnvironmentRow> {
    const environment = await this.get(userId, environmentId, db);
    const expected = Buffer.from(environment.credential_hash, 'hex');
    if (!timingSafeEqual(hashCredential(credential), expected)) throw errors.invalidEnvironmentCredential();
    return environment;
  }

  /** Marks the environment online and claims the commands waiting for it, each leased. */
  async heartbeat(userId: string, environmentId: string, credential: string, report: { agentVersion?: string; status?: 'idle' | 'busy' }) {
    return this.db.transaction().execute(async (trx) => {
      await this.authenticate(userId, environmentId, credential, trx);
      const now = this.now();
      await repo.settleCommands(trx, environmentId, now);
      const commands = await repo.claimCommands(
        trx,
        environmentId,
        new Date(now.getTime() + this.settings.commandLeaseMs),
        CLAIMS_PER_HEARTBEAT,
      );
      await repo.updateEnvironment(trx, userId, environmentId, {
        last_heartbeat_at: now,
        ...(report.agentVersion !== undefined ? { agent_version: report.agentVersion } : {}),
        ...(report.status !== undefined ? { reported_status: report.status } : {}),
        updated_at: now,
      });
      return { environment: await this.get(userId, environmentId, trx), commands };
    });
  }

  async enqueue(userId: string, environmentId: string, input: { type: string; payload?: Record<string, unknown>; ttlSeconds?: number }) {
    const payload = input.payload ?? {};
    if (Buffer.byteLength(JSON.stringify(payload), 'utf8') > MAX_PAYLOAD_BYTES) {
      throw errors.payloadTooLarge(`A command's payload may be at most ${MAX_PAYLOAD_BYTES} bytes as JSON.`);
    }
    return this.db.transaction().execute(async (trx) => {
      const environment = await this.get(userId, environmentId, trx);
      this.requireInsideGrant(environment, payload);
      // Serializes enqueues per environment, so the waiting limit holds under concurrency.
      await lockForTransaction(trx, `agent-commands:${environmentId}`);
      const now = this.now();
      await repo.settleCommands(trx, environmentId, now);
      if ((await repo.countWaiting(trx, environmentId)) >= MAX_WAITING_COMMANDS) {
        throw errors.conflict(`At most ${MAX_WAITING_COMMANDS} commands may wait for an environment.`);
      }
      return repo.insertCommand(trx, {
        id: uuidv7(now.getTime()),
        environment_id: environmentId,
        type: input.type,
        payload: JSON.stringify(payload),
        status: 'queued',
        expires_at: new Date(now.getTime() + (input.ttlSeconds ?? DEFAULT_COMMAND_TTL_SECONDS) * 1000),
        created_at: now,
      });
    });
  }

  async command(userId: string, environmentId: string, commandId: string): Promise<repo.CommandRow> {
    await this.get(userId, environmentId);
    await repo.settleCommands(this.db, environmentId, this.now());
    const command = await repo.findCommand(this.db, environmentId, commandId);
    if (!command) throw errors.notFound('Command not found.');
    return command;
  }

  async commands(userId: string, environmentId: string, filter: { status?: repo.CommandStatus }, page: PageRequest) {
    await this.get(userId, environmentId);
    await repo.settleCommands(this.db, environmentId, this.now());
    return repo.commandList.page(this.db, { environmentId, ...filter }, page);
  }

  /**
   * Accepts or rejects a claimed command. The same acknowledgement again answers the command as it
   * is; anything else on a command that is not claimed is `409 command_not_claimed`.
   */
  async acknowledge(
    userId: string,
    path: { environmentId: string; commandId: string },
    credential: string,
    ack: {
      protocolVersion: number;
      commandId: string;
      environmentId: string;
      accepted: boolean;
      errorCode?: string;
      errorMessage?: string;
    },
  ): Promise<repo.CommandRow> {
    return this.db.transaction().execute(async (trx) => {
      await this.authenticate(userId, path.environmentId, credential, trx);
      const mismatches: ErrorDetail[] = (['commandId', 'environmentId'] as const)
        .filter((field) => ack[field] !== path[field])
        .map((field) => ({ path: `/body/${field}`, message: `must equal the path parameter ${field}` }));
      if (mismatches.length > 0) throw errors.commandIdMismatch(mismatches);
      requireProtocol(ack.protocolVersion);
      const now = this.now();
      await repo.settleCommands(trx, path.environmentId, now);
      const command = await repo.findCommand(trx, path.environmentId, path.commandId, { lock: true });
      if (!command) throw errors.notFound('Command not found.');
      const outcome = ack.accepted
        ? { status: 'accepted', error_code: null, error_message: null }
        : { status: 'rejected', error_code: ack.errorCode ?? null, error_message: ack.errorMessage ?? null };
      const repeated =
        command.status === outcome.status && command.error_code === outcome.error_code && command.error_message === outcome.error_message;
      if (repeated) return command;
      if (command.status !== 'claimed') throw errors.commandNotClaimed(command.status);
      return repo.updateCommand(trx, command.id, { ...outcome, lease_expires_at: null, acknowledged_at: now });
    });
  }

  /** Replaces the grant; roots are normalized for the environment's platform, `..` and duplicates refused. */
  async setGrant(userId: string, environmentId: string, grant: FilesystemGrant): Promise<repo.EnvironmentRow> {
    const environment = await this.get(userId, environmentId);
    let stored: FilesystemGrant = grant;
    if (grant.mode === 'selected_roots') {
      const style = pathStyle(environment.platform);
      const problems: ErrorDetail[] = [];
      const roots: string[] = [];
      const seen = new Map<string, number>();
      for (const [i, root] of grant.roots.entries()) {
        const where = `/body/filesystemGrant/roots/${i}`;
        const normalized = normalizePath(root, style);
        const key = 'path' in normalized ? (style === 'windows' ? normalized.path.toLowerCase() : normalized.path) : '';
        const first = seen.get(key);
        if ('problem' in normalized) problems.push({ path: where, message: normalized.problem });
        else if (first !== undefined) problems.push({ path: where, message: `is the same path as roots/${first} (${normalized.path})` });
        else {
          seen.set(key, i);
          roots.push(normalized.path);
        }
      }
      if (problems.length > 0) throw errors.invalidRequest('The filesystem grant is not valid.', problems);
      stored = { mode: 'selected_roots', roots };
    }
    await repo.updateEnvironment(this.db, userId, environmentId, { filesystem_grant: JSON.stringify(stored), updated_at: this.now() });
    return this.get(userId, environmentId);
  }

  /** `400` for a path that is not one, `403 path_outside_grant` for one the grant does not cover. */
  private requireInsideGrant(environment: repo.EnvironmentRow, payload: Record<string, unknown>): void {
    const named = pathsNamed(payload);
    if (named.length === 0) return;
    const style = pathStyle(environment.platform);
    const grant = environment.filesystem_grant as FilesystemGrant | null;
    const invalid: ErrorDetail[] = [];
    const outside: ErrorDetail[] = [];
    for (const entry of named) {
      const where = entry.where;
      const normalized = 'problem' in entry ? entry : normalizePath(entry.path, style);
      if ('problem' in normalized) invalid.push({ path: where, message: normalized.problem });
      else if (!grant) outside.push({ path: where, message: `${normalized.path}: the environment has no filesystem grant` });
      else if (grant.mode === 'selected_roots' && !grant.roots.some((root) => isWithin(normalized.path, root, style))) {
        outside.push({ path: where, message: `${normalized.path} is outside the grant` });
      }
    }
    if (invalid.length > 0) throw errors.invalidRequest("The command's payload names paths that are not valid.", invalid);
    if (outside.length > 0) throw errors.pathOutsideGrant(outside);
  }
}
