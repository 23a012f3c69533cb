import type { GetPromptResult, Prompt } from '@modelcontextprotocol/sdk/types.js' with { 'resolution-mode': 'import' };
import { ApiError } from '../../platform/errors';
import { decodeCursor } from '../../platform/pagination';
import type { SkillService } from '../skills/service';

/** How many prompts a page of prompts/list holds. */
const PAGE = 50;

/** A prompt that is not the caller's, or a cursor not made here: a JSON-RPC `InvalidParams` error. */
export class InvalidPromptRequest extends Error {}

/** The caller's enabled skills as MCP prompts: named by the skill's id, its instructions as the message. */
export class McpPrompts {
  constructor(private readonly skills: Pick<SkillService, 'list' | 'get'>) {}

  async list(userId: string, cursor: string | undefined): Promise<{ prompts: Prompt[]; nextCursor?: string }> {
    const beforeId = cursor === undefined ? null : decodeCursor(cursor);
    if (cursor !== undefined && beforeId === null) throw new InvalidPromptRequest('The cursor is not one this server gave.');
    const page = await this.skills.list(userId, { enabled: true }, { limit: PAGE, beforeId });
    return {
      prompts: page.items.map((skill) => ({ name: skill.id, title: skill.name, description: skill.description || skill.name })),
      ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
    };
  }

  async get(userId: string, name: string): Promise<GetPromptResult> {
    const skill = await this.skills.get(userId, name).catch((error: unknown) => {
      if (error instanceof ApiError && error.status === 404) return null;
      throw error;
    });
    if (!skill || !skill.enabled) throw new InvalidPromptRequest(`Prompt ${name} not found`);
    return {
      description: skill.description || skill.name,
      messages: [{ role: 'user', content: { type: 'text', text: skill.instructions } }],
    };
  }
}
