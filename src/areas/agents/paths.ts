/**
 * Paths on an environment's machine: absolute, POSIX on Linux and macOS, drive paths on Windows.
 * They are compared in normalized form, so `/a//b/./c/` and `/a/b/c` are the same path, and a
 * `..` segment is refused rather than resolved (the service cannot see the machine's links).
 */
export type PathStyle = 'posix' | 'windows';

export function pathStyle(platform: string): PathStyle {
  return platform === 'windows' ? 'windows' : 'posix';
}

/** The normalized form of an absolute path, or why it is not one. */
export function normalizePath(input: string, style: PathStyle): { path: string } | { problem: string } {
  if (input.includes('\0')) return { problem: 'must not contain NUL characters' };
  let prefix: string;
  let rest: string;
  if (style === 'windows') {
    const drive = /^([A-Za-z]):([\\/]|$)/.exec(input);
    if (!drive) return { problem: 'must be an absolute Windows path such as C:\\Users\\ada' };
    prefix = `${drive[1]!.toUpperCase()}:\\`;
    rest = input.slice(2);
  } else {
    if (!input.startsWith('/')) return { problem: 'must be an absolute path such as /home/ada' };
    prefix = '/';
    rest = input;
  }
  const segments = rest.split(style === 'windows' ? /[\\/]+/ : /\/+/).filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) return { problem: 'must not contain .. segments' };
  return { path: prefix + segments.join(style === 'windows' ? '\\' : '/') };
}

/** Whether `path` is `root` or below it (both normalized; Windows compares without case). */
export function isWithin(path: string, root: string, style: PathStyle): boolean {
  const [p, r] = style === 'windows' ? [path.toLowerCase(), root.toLowerCase()] : [path, root];
  const separator = style === 'windows' ? '\\' : '/';
  return p === r || p.startsWith(r.endsWith(separator) ? r : r + separator);
}

/** The payload fields that name paths. */
export const PATH_FIELDS = ['cwd', 'path', 'root'] as const;
export const PATH_LIST_FIELD = 'paths';

/** Every path a command's payload names, with where it is (`/body/payload/…`), or what is wrong with it. */
export function pathsNamed(payload: Record<string, unknown>): ({ where: string; path: string } | { where: string; problem: string })[] {
  const named = PATH_FIELDS.filter((field) => payload[field] !== undefined).map((field) => ({
    where: `/body/payload/${field}`,
    value: payload[field],
  }));
  const list = payload[PATH_LIST_FIELD];
  if (list !== undefined && !Array.isArray(list))
    return [{ where: `/body/payload/${PATH_LIST_FIELD}`, problem: 'must be an array of paths' }];
  (list ?? []).forEach((value: unknown, i: number) => named.push({ where: `/body/payload/${PATH_LIST_FIELD}/${i}`, value }));
  return named.map(({ where, value }) => (typeof value === 'string' ? { where, path: value } : { where, problem: 'must be a string' }));
}
