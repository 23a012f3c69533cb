import { errors } from '../../platform/errors';

/** A tool a skill offers, and the policy it runs under. */
export interface SkillTool {
  name: string;
  policy: 'allow' | 'approval_required' | 'deny';
}
/** The knowledge a skill's grounded chats search (within what the chatting user may read). */
export interface KnowledgeScope {
  projectIds: string[];
  fileIds: string[];
}

/**
 * What a skill names, checked as its owner: the areas it refers to, wired in composition (the
 * tool registry and files are built after skills, whose services need them only per request).
 */
export interface SkillReferences {
  /** `400` naming `field` unless `modelId` is a chat model the user may use now. */
  checkModel(userId: string, modelId: string, field: string): Promise<void>;
  /** The names of the user's tools in the tool registry (built-in and their MCP servers'). */
  toolNames(userId: string): Promise<Set<string>>;
  /** `404` naming `field` unless the user may read the project. */
  requireProject(userId: string, projectId: string, field: string): Promise<void>;
  /** `404` naming `field` unless the user may read the file. */
  requireFile(userId: string, fileId: string, field: string): Promise<void>;
}

/** The assistant fields of a create or update request. */
interface AssistantInput {
  model?: string | null;
  tools?: SkillTool[];
  knowledgeScope?: { projectIds?: string[]; fileIds?: string[] } | null;
}

/** The assistant fields checked: absent stays absent (an update leaves them), null clears. */
export interface CheckedAssistant {
  model?: string | null;
  tools?: SkillTool[];
  knowledgeScope?: KnowledgeScope | null;
}

/** Checks a skill's model, tools and knowledge scope against what its owner may use and read. */
export class SkillChecks {
  constructor(private readonly references: SkillReferences) {}

  async assistant(ownerUserId: string, input: AssistantInput): Promise<CheckedAssistant> {
    const checked: CheckedAssistant = {};
    if (input.model !== undefined) {
      if (input.model !== null) await this.references.checkModel(ownerUserId, input.model, '/body/model');
      checked.model = input.model;
    }
    if (input.tools !== undefined) checked.tools = await this.tools(ownerUserId, input.tools);
    if (input.knowledgeScope !== undefined) checked.knowledgeScope = await this.scope(ownerUserId, input.knowledgeScope);
    return checked;
  }

  /** Each tool named once, and one the owner has. */
  private async tools(ownerUserId: string, tools: SkillTool[]): Promise<SkillTool[]> {
    const seen = new Set<string>();
    const problems: Array<{ path: string; message: string }> = [];
    const known = tools.length > 0 ? await this.references.toolNames(ownerUserId) : new Set<string>();
    for (const [i, tool] of tools.entries()) {
      if (seen.has(tool.name)) problems.push({ path: `/body/tools/${i}/name`, message: 'names a tool named before' });
      else if (!known.has(tool.name)) problems.push({ path: `/body/tools/${i}/name`, message: 'names no tool you have' });
      seen.add(tool.name);
    }
    if (problems.length > 0) throw errors.invalidRequest('A skill can only offer tools you have, each once.', problems);
    return tools.map(({ name, policy }) => ({ name, policy }));
  }

  /** Projects and files the owner may read, each once. */
  private async scope(ownerUserId: string, scope: (AssistantInput['knowledgeScope'] & object) | null): Promise<KnowledgeScope | null> {
    if (scope === null) return null;
    const projectIds = [...new Set(scope.projectIds ?? [])];
    const fileIds = [...new Set(scope.fileIds ?? [])];
    await Promise.all([
      ...projectIds.map((id) =>
        this.references.requireProject(ownerUserId, id, `knowledgeScope/projectIds/${scope.projectIds!.indexOf(id)}`),
      ),
      ...fileIds.map((id) => this.references.requireFile(ownerUserId, id, `knowledgeScope/fileIds/${scope.fileIds!.indexOf(id)}`)),
    ]);
    return { projectIds, fileIds };
  }
}
