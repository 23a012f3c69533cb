import { createHash } from 'node:crypto';

/**
 * How MCP tools are named for models. Model APIs accept tool names matching `TOOL_NAME`; built-in
 * tools never contain `__`. A server's tools are named `<prefix>__<tool>`: the prefix is chosen
 * once, when the server is created (from its name, unique among the owner's servers), and kept, so
 * the names stay the same across refreshes and renames. A tool name that has other characters, or
 * is too long to fit, is cut and suffixed with `_` and 8 hexadecimal digits of its SHA-256: still
 * stable, and distinct from every other tool name of the server.
 */
export const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** The separator between a server's prefix and its tool's name. */
export const SEPARATOR = '__';

const PREFIX_BASE_MAX = 20;
const PREFIX_MAX = 24;

/** The prefix a server's name suggests: lower case letters, digits and single `-`, at most 20 characters (`mcp` when none is left). */
export function prefixFrom(name: string): string {
  const slug = name
    .normalize('NFKD')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, PREFIX_BASE_MAX)
    .replace(/^-+|-+$/g, '');
  return slug === '' ? 'mcp' : slug;
}

/** `base`, or `base-2`, `base-3`… when the owner's servers already use it. */
export function uniquePrefix(base: string, taken: ReadonlySet<string>): string {
  if (!taken.has(base)) return base;
  for (let n = 2; ; n++) {
    const candidate = `${base}-${n}`.slice(-PREFIX_MAX);
    if (!taken.has(candidate)) return candidate;
  }
}

/** The name models call a server's tool by (matches TOOL_NAME, contains `__` once after the prefix). */
export function namespacedName(prefix: string, toolName: string): string {
  const room = 64 - prefix.length - SEPARATOR.length;
  if (/^[a-zA-Z0-9_-]+$/.test(toolName) && toolName.length <= room) return `${prefix}${SEPARATOR}${toolName}`;
  const hash = createHash('sha256').update(toolName).digest('hex').slice(0, 8);
  const kept = toolName.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, room - hash.length - 1);
  return `${prefix}${SEPARATOR}${kept}_${hash}`;
}

/** The prefix part of a namespaced name, or null when the name is not one (a built-in tool's). */
export function prefixOf(name: string): string | null {
  const at = name.indexOf(SEPARATOR);
  return at <= 0 ? null : name.slice(0, at);
}
