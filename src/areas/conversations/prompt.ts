/** What a chat turn asks the model: its context, read as the caller, and the prompt made of it. */
import { type Grounding, groundingBlock } from '../../platform/ai/grounding';
import type { ChatMessage, UserContentPart } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import type { MemoryService } from '../memory/service';
import type { ProjectService } from '../projects/service';
import type { ToolService, TurnTools } from '../tools/service';
import * as repo from './repository';
import type { MessagePart } from './turn';

const HISTORY_MESSAGES = 20;
const MEMORY_ITEMS = 5;
const SYSTEM_PROMPT = 'You are the assistant of an AI workspace. Answer in Markdown.';

/** What a turn's prompt is read from (`TurnContexts.read`). */
export interface TurnContext {
  project: { name: string; instructions: string | null } | null;
  memory: Array<{ content: string }>;
  history: Array<{ role: string; content: string }>;
  tools: TurnTools | null;
}

/** A branch's recent messages, and the message they were read up from (null: none was found). */
export interface BranchHistory {
  startId: string | null;
  messages: TurnContext['history'];
}

/** The reads of a turn's context that need only the conversation's id: started before it is read. */
export interface EarlyReads {
  history: Promise<BranchHistory>;
  tools: Promise<TurnContext['tools']>;
}

export interface TurnContextsDeps {
  db: Database;
  projects: Pick<ProjectService, 'get'>;
  memory: Pick<MemoryService, 'relevant'>;
  /** The tool registry the caller's tools are read from. */
  tools: Pick<ToolService, 'forTurn'>;
  /** Whether turns use tools at all (CHAT_TOOLS). */
  toolsEnabled: boolean;
}

/** Reads what a turn's prompt is made of: the project, relevant memory, the history, the caller's tools. */
export class TurnContexts {
  private readonly db: Database;
  private readonly projects: Pick<ProjectService, 'get'>;
  private readonly memory: Pick<MemoryService, 'relevant'>;
  private readonly tools: Pick<ToolService, 'forTurn'>;
  private readonly toolsEnabled: boolean;

  constructor({ db, projects, memory, tools, toolsEnabled }: TurnContextsDeps) {
    this.db = db;
    this.projects = projects;
    this.memory = memory;
    this.tools = tools;
    this.toolsEnabled = toolsEnabled;
  }

  /**
   * Starts reading the caller's tools and the history of `conversationId`: the branch up from
   * `from` (the message a turn's user message follows; undefined, the conversation's current leaf
   * as it is now, before the conversation is read; null, none).
   */
  startReads(userId: string, conversationId: string, from: string | null | undefined): EarlyReads {
    return { history: this.history(conversationId, from), tools: this.turnTools(userId) };
  }

  /**
   * A turn's context: the project and relevant memory, read now, with the history (the branch up
   * from `startId`) and tools of `early`.
   */
  async read(
    userId: string,
    conversation: repo.ConversationRow,
    text: string,
    early: EarlyReads,
    startId: string | null,
  ): Promise<TurnContext> {
    // Read up from another message than the turn follows (the current leaf moved between the two
    // reads): read again from the right one.
    const history = early.history.then((read) => (read.startId === startId ? read : this.history(conversation.id, startId)));
    const [project, memory, branch, tools] = await Promise.all([
      conversation.project_id ? this.projects.get(userId, conversation.project_id).catch(() => null) : null,
      this.memory.relevant(userId, conversation.project_id, text, MEMORY_ITEMS),
      history,
      early.tools,
    ]);
    return { project, memory, history: branch.messages, tools };
  }

  private async history(conversationId: string, from: string | null | undefined): Promise<BranchHistory> {
    if (from === null) return { startId: null, messages: [] };
    return repo.branchHistory(this.db, conversationId, from, HISTORY_MESSAGES);
  }

  /** The caller's tools for a turn, or null when turns use none. */
  private async turnTools(userId: string): Promise<TurnTools | null> {
    if (!this.toolsEnabled) return null;
    return this.tools.forTurn(userId);
  }
}

/**
 * System prompt (the skill's instructions or the service's, project instructions, relevant
 * memory, the tool sources the turn goes without, a grounded turn's sources), recent history and
 * the new message (its text, or its text and images).
 */
export function buildPrompt(
  context: TurnContext,
  message: string | UserContentPart[],
  grounding: Grounding | undefined,
  skill: { name: string; instructions: string } | null = null,
): ChatMessage[] {
  const { project, memory, history, tools } = context;
  // A skill's instructions are the system prompt (its name only, when it has none).
  let system = skill
    ? skill.instructions.trim() !== ''
      ? skill.instructions
      : `You are "${skill.name}", an assistant of an AI workspace. Answer in Markdown.`
    : SYSTEM_PROMPT;
  if (project)
    system += `\n\nThe conversation belongs to the project "${project.name}".${project.instructions ? `\nProject instructions:\n${project.instructions}` : ''}`;
  if (memory.length > 0) system += `\n\nWhat you know about the user:\n${memory.map((m) => `- ${m.content}`).join('\n')}`;
  const unavailable = tools?.unavailable ?? [];
  if (unavailable.length > 0) {
    const servers = unavailable.map((u) => `- the MCP server "${u.serverName}": ${u.reason}`).join('\n');
    system += `\n\nThese tool sources of the user are unavailable now; their tools are not offered. If the user asks for what they would do, say so.\n${servers}`;
  }
  if (grounding) system += `\n\n${groundingBlock(grounding)}`;
  return [
    { role: 'system', content: system },
    ...history.map((m) => ({ role: m.role as 'user' | 'assistant', content: m.content })),
    { role: 'user', content: message },
  ];
}

/** The model's view of a turn so far: each step's text and tool calls, then their results. */
export function promptOfParts(parts: MessagePart[]): ChatMessage[] {
  const messages: ChatMessage[] = [];
  let assistant: Extract<ChatMessage, { role: 'assistant' }> | null = null;
  for (const part of parts) {
    // What the turn went without is told in the system prompt and in the failed call's result.
    if (part.type === 'tool-source-unavailable') continue;
    if (part.type === 'tool-result') {
      assistant = null;
      messages.push({ role: 'tool', toolCallId: part.toolCallId, toolName: part.toolName, content: part.output, isError: part.isError });
      continue;
    }
    if (!assistant) {
      assistant = { role: 'assistant', content: '', toolCalls: [] };
      messages.push(assistant);
    }
    if (part.type === 'text') assistant.content += part.text;
    else if (part.type === 'tool-call')
      assistant.toolCalls?.push({ toolCallId: part.toolCallId, toolName: part.toolName, arguments: part.arguments });
  }
  return messages;
}
