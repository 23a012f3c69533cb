import type { Database } from '../../platform/db';
import type { AuditService } from '../audit/service';
import type { FileService } from '../files/service';
import type { NoteService } from '../notes/service';
import type { SkillService } from '../skills/service';
import type { ToolService } from '../tools/service';
import { McpApprovalService } from './approvals';
import { McpPrompts } from './prompts';
import { McpResources } from './resources';
import { workspaceServer } from './server';
import { type McpCaller, McpTools } from './tools';

export type { McpCaller } from './tools';

/** What the workspace's MCP server is built from. */
export interface McpWorkspaceDeps {
  db: Database;
  audit: Pick<AuditService, 'record'>;
  tools: Pick<ToolService, 'forTurn' | 'checkArguments'>;
  notes: Pick<NoteService, 'list' | 'get'>;
  files: Pick<FileService, 'list' | 'ingestedText'>;
  skills: Pick<SkillService, 'list' | 'get'>;
  /** How long an approval of an MCP call waits for the user's decision. */
  approvalTtlMs: number;
  /** The service's version, announced in the MCP handshake. */
  version: string;
  log: (message: string, meta: Record<string, unknown>) => void;
}

/**
 * The workspace as an MCP server: a server for each request of a caller (tools, prompts and
 * resources over their own data), and the approvals of the calls made through it.
 */
export class McpWorkspaceService {
  readonly approvals: McpApprovalService;
  private readonly tools: McpTools;
  private readonly prompts: McpPrompts;
  private readonly resources: McpResources;
  private readonly version: string;
  private readonly log: (message: string, meta: Record<string, unknown>) => void;

  constructor(deps: McpWorkspaceDeps) {
    this.approvals = new McpApprovalService({ db: deps.db, audit: deps.audit, tools: deps.tools, approvalTtlMs: deps.approvalTtlMs });
    this.tools = new McpTools(deps.tools, this.approvals);
    this.prompts = new McpPrompts(deps.skills);
    this.resources = new McpResources(deps.notes, deps.files);
    this.version = deps.version;
    this.log = deps.log;
  }

  /** A new MCP server for one request of `caller` (not yet connected to a transport). */
  serverFor(caller: McpCaller): ReturnType<typeof workspaceServer> {
    return workspaceServer(caller, {
      tools: this.tools,
      prompts: this.prompts,
      resources: this.resources,
      version: this.version,
      log: this.log,
    });
  }
}
