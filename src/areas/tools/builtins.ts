import { ApiError } from '../../platform/errors';
import type { AutomationService } from '../automations/service';
import type { FileService } from '../files/service';
import type { KnowledgeService } from '../knowledge/service';
import type { MemoryService } from '../memory/service';
import type { NoteService } from '../notes/service';
import type { ProjectService } from '../projects/service';
import type { ToolCallResult, ToolDefinition, ToolKnowledgeScope, ToolSource } from './service';

/** The areas the built-in tools act through, always on the caller's own data. */
export interface BuiltinToolsDeps {
  knowledge: Pick<KnowledgeService, 'search'>;
  memory: Pick<MemoryService, 'relevant' | 'create'>;
  notes: Pick<NoteService, 'create' | 'get'>;
  files: Pick<FileService, 'ingestedText'>;
  projects: Pick<ProjectService, 'list'>;
  automations: Pick<AutomationService, 'queueRun'>;
  /** The operator's policies for some built-in tools, replacing their defaults (BUILTIN_TOOL_POLICIES). */
  policies?: Record<string, 'allow' | 'approval_required' | 'deny'>;
}

type Args = Record<string, unknown>;

interface Builtin {
  description: string;
  /** JSON Schema (2020-12) of the arguments; the ToolService checks a call against it before `run`. */
  inputSchema: Record<string, unknown>;
  /** `allow` for tools that only read, `approval_required` for tools that change data or spend. */
  policy: 'allow' | 'approval_required';
  /** `within`: a skill's knowledge scope, which the search tools search only. */
  run(userId: string, args: Args, within: ToolKnowledgeScope | null): Promise<unknown>;
}

const QUERY = { type: 'string', minLength: 1, maxLength: 500, description: 'What to look for.' } as const;
const LIMIT = { type: 'integer', minimum: 1, maximum: 20, description: 'How many results (default 5).' } as const;
const ID = { type: 'string', minLength: 1, maxLength: 200 } as const;
/** The most characters of a file's text `file_read` returns (the result cap may cut it further). */
const FILE_MAX_CHARS = 200_000;

const limitOf = (args: Args) => (args.limit as number | undefined) ?? 5;

/**
 * The built-in tools: a tool source over the service's own areas. Every call acts as the caller
 * and through the area's service, so it sees and changes only what the caller could over the API.
 */
export class BuiltinTools implements ToolSource {
  private readonly tools: Record<string, Builtin>;
  private readonly policies: Record<string, 'allow' | 'approval_required' | 'deny'>;

  constructor(deps: BuiltinToolsDeps) {
    this.policies = deps.policies ?? {};
    const search = async (
      userId: string,
      args: Args,
      sources: Array<'files' | 'memory' | 'notes' | 'projects'>,
      within: ToolKnowledgeScope | null,
    ) => {
      const result = await deps.knowledge.search(userId, { query: args.query as string, limit: limitOf(args), sources }, false, within);
      return result.hits.map(({ hit }) => ({
        source: hit.kind,
        id: hit.id,
        title: hit.title,
        snippet: hit.snippet,
        ...(hit.file_id ? { fileId: hit.file_id } : {}),
      }));
    };
    this.tools = {
      knowledge_search: {
        description:
          "Searches the user's knowledge (files, memory, notes, projects) by meaning and words; returns the best matches' source, id, title and snippet.",
        inputSchema: {
          type: 'object',
          properties: {
            query: QUERY,
            limit: LIMIT,
            sources: {
              type: 'array',
              items: { type: 'string', enum: ['files', 'memory', 'notes', 'projects'] },
              minItems: 1,
              maxItems: 4,
              uniqueItems: true,
              description: 'Which sources (default all).',
            },
          },
          required: ['query'],
          additionalProperties: false,
        },
        policy: 'allow',
        run: (userId, args, within) =>
          search(
            userId,
            args,
            (args.sources as Array<'files' | 'memory' | 'notes' | 'projects'> | undefined) ?? ['files', 'memory', 'notes', 'projects'],
            within,
          ),
      },
      memory_search: {
        description: 'Finds what the assistant remembers about the user (facts and preferences) sharing words with the query.',
        inputSchema: { type: 'object', properties: { query: QUERY, limit: LIMIT }, required: ['query'], additionalProperties: false },
        policy: 'allow',
        run: async (userId, args) =>
          (await deps.memory.relevant(userId, null, args.query as string, limitOf(args))).map((m) => ({
            memoryId: m.id,
            content: m.content,
          })),
      },
      memory_save: {
        description: 'Remembers a fact or preference about the user for later conversations.',
        inputSchema: {
          type: 'object',
          properties: {
            content: { type: 'string', minLength: 1, maxLength: 4000, pattern: '\\S', description: 'What to remember, in one sentence.' },
            kind: { type: 'string', enum: ['fact', 'preference'], description: 'fact (default) or preference.' },
          },
          required: ['content'],
          additionalProperties: false,
        },
        policy: 'approval_required',
        run: async (userId, args) => {
          const { item, created } = await deps.memory.create(userId, {
            kind: (args.kind as 'fact' | 'preference' | undefined) ?? 'fact',
            content: args.content as string,
            source: 'assistant',
          });
          return { memoryId: item.id, content: item.content, created };
        },
      },
      notes_search: {
        description: "Searches the user's notes; returns the best matches' ids, titles and snippets.",
        inputSchema: { type: 'object', properties: { query: QUERY, limit: LIMIT }, required: ['query'], additionalProperties: false },
        policy: 'allow',
        run: async (userId, args, within) =>
          (await search(userId, args, ['notes'], within)).map((h) => ({ noteId: h.id, title: h.title, snippet: h.snippet })),
      },
      notes_read: {
        description: "Reads one of the user's notes: its title and Markdown text.",
        inputSchema: {
          type: 'object',
          properties: { noteId: { ...ID, description: 'The note (its noteId).' } },
          required: ['noteId'],
          additionalProperties: false,
        },
        policy: 'allow',
        run: async (userId, args) => {
          const note = await deps.notes.get(userId, args.noteId as string);
          return { noteId: note.id, title: note.title, content: note.content, projectId: note.project_id };
        },
      },
      notes_create: {
        description: 'Creates a note for the user (Markdown).',
        inputSchema: {
          type: 'object',
          properties: {
            title: { type: 'string', maxLength: 200, description: 'The title.' },
            content: { type: 'string', maxLength: 200000, description: 'The Markdown text.' },
          },
          required: ['title', 'content'],
          additionalProperties: false,
        },
        policy: 'approval_required',
        run: async (userId, args) => {
          const note = await deps.notes.create(userId, { title: args.title as string, content: args.content as string });
          return { noteId: note.id, title: note.title };
        },
      },
      file_read: {
        description: "Reads the extracted text of one of the user's ingested files (or one shared with them).",
        inputSchema: {
          type: 'object',
          properties: { fileId: { ...ID, description: 'The file (its fileId).' } },
          required: ['fileId'],
          additionalProperties: false,
        },
        policy: 'allow',
        run: async (userId, args) => {
          const { file, text, truncated } = await deps.files.ingestedText(userId, args.fileId as string, FILE_MAX_CHARS);
          return { fileId: file.id, name: file.name, text, truncated };
        },
      },
      projects_list: {
        description: "Lists the user's projects (newest first): ids, names and descriptions.",
        inputSchema: {
          type: 'object',
          properties: { limit: { type: 'integer', minimum: 1, maximum: 50, description: 'How many (default 20).' } },
          additionalProperties: false,
        },
        policy: 'allow',
        run: async (userId, args) => {
          const page = await deps.projects.list(userId, {}, { limit: (args.limit as number | undefined) ?? 20, beforeId: null });
          return page.items.map((p) => ({ projectId: p.id, name: p.name, description: p.description, parentId: p.parent_id }));
        },
      },
      automation_run: {
        description: "Starts a run of one of the user's automations now (it is charged like any run); returns the run's id and status.",
        inputSchema: {
          type: 'object',
          properties: { automationId: { ...ID, description: 'The automation (its automationId).' } },
          required: ['automationId'],
          additionalProperties: false,
        },
        policy: 'approval_required',
        run: async (userId, args) => {
          const { run } = await deps.automations.queueRun(userId, args.automationId as string);
          return { runId: run.id, automationId: run.automation_id, status: run.status };
        },
      },
    };
  }

  async listTools(): Promise<{ tools: ToolDefinition[]; unavailable: [] }> {
    const tools = Object.entries(this.tools).map(([name, tool]) => ({
      name,
      description: tool.description,
      inputSchema: tool.inputSchema,
      source: { type: 'builtin' as const },
      policy: this.policies[name] ?? tool.policy,
      // The tools whose default is `allow` only read.
      readOnly: tool.policy === 'allow',
    }));
    return { tools, unavailable: [] };
  }

  async callTool(userId: string, name: string, args: Args, options?: { within?: ToolKnowledgeScope | null }): Promise<ToolCallResult> {
    const tool = this.tools[name];
    if (!tool) return { output: `There is no built-in tool named ${name}.`, isError: true };
    try {
      return { output: JSON.stringify(await tool.run(userId, args, options?.within ?? null)), isError: false };
    } catch (error) {
      // The area's refusal (a record that is not the caller's, a conflict…) is the model's to read.
      if (error instanceof ApiError && error.status < 500) return { output: error.message, isError: true };
      throw error;
    }
  }
}
