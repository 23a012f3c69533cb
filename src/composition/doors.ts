import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { AccessTokenService } from '../areas/access-tokens/service';
import type { AuditService } from '../areas/audit/service';
import type { BillingService } from '../areas/billing/service';
import type { FileService } from '../areas/files/service';
import { McpWorkspaceService } from '../areas/mcp-server/service';
import type { ModelService } from '../areas/models/service';
import type { NoteService } from '../areas/notes/service';
import { CONSENT_PATH, mcpResource } from '../areas/oauth/authorization-route';
import { OAuthService } from '../areas/oauth/service';
import { RemoteImages } from '../areas/openai/images';
import { OpenAiService } from '../areas/openai/service';
import type { PrincipalService } from '../areas/principals/service';
import type { SkillService } from '../areas/skills/service';
import type { ToolService } from '../areas/tools/service';
import type { Config } from '../config';
import type { DeploymentEmbedder } from '../platform/ai/embeddings';
import type { Database } from '../platform/db';
import type { Outbound } from '../platform/net/outbound';
import { deploymentEmbedderId } from './derived';

/** The doors for other software (DESIGN section 20): access tokens, OAuth sign-in, `/v1` and `/mcp`. */
export interface Doors {
  /** Personal access tokens, and the tokens OAuth clients get. */
  accessTokens: AccessTokenService;
  /** The authorization server of the MCP resource (OAuth 2.1). */
  oauth: OAuthService;
  /** The OpenAI-compatible API under /v1: models, chat completions and embeddings. */
  openai: OpenAiService;
  /** The workspace as an MCP server (`/mcp`), and the approvals of the calls made through it. */
  mcpWorkspace: McpWorkspaceService;
}

export interface DoorsDeps {
  config: Config;
  db: Database;
  doc: OpenAPIV3.DocumentV3;
  audit: AuditService;
  principals: PrincipalService;
  models: ModelService;
  billing: BillingService;
  /** The deployment's embedder. */
  embedder: DeploymentEmbedder;
  outbound: Outbound;
  tools: ToolService;
  notes: NoteService;
  files: FileService;
  skills: SkillService;
  warn: (message: string, meta: Record<string, unknown>) => void;
}

/** Builds the doors over the services they open onto. */
export function createDoors({
  config,
  db,
  doc,
  audit,
  principals,
  models,
  billing,
  embedder,
  outbound,
  tools,
  notes,
  files,
  skills,
  warn,
}: DoorsDeps): Doors {
  const accessTokens = new AccessTokenService({ db, audit, principals, settings: config.accessTokens });
  return {
    accessTokens,
    oauth: new OAuthService({ db, accessTokens, resource: mcpResource(config.integrations.publicUrl), consentPath: CONSENT_PATH }),
    openai: new OpenAiService({
      db,
      models,
      skills,
      billing,
      // The deployment's embedder, by the model id it is called with.
      embeddings: { id: deploymentEmbedderId(config), embedder },
      // Images given by URL: as large as chat's attached images, read within the model's timeout.
      images: new RemoteImages(outbound, { maxBytes: config.models.attachmentImageMaxBytes, timeoutMs: config.models.timeoutMs }),
      timeoutMs: config.models.timeoutMs,
      log: warn,
    }),
    mcpWorkspace: new McpWorkspaceService({
      db,
      audit,
      tools,
      notes,
      files,
      skills,
      approvalTtlMs: config.tools.approvalTtlMs,
      version: doc.info.version,
      log: warn,
    }),
  };
}
