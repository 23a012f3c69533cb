/**
 * `make docs-check [DOCS="docs/a.md docs/areas/b.md"]`: runs the guides' runnable blocks as a new
 * user would paste them, and fails when one fails. CI runs it (.ci/run).
 *
 * What is run, per guide (docs/*.md and docs/areas/*.md unless DOCS names others):
 * - fenced blocks whose info string carries `runnable`: ```` ```sh runnable ```` (shell, pasted as
 *   is) and ```` ```ts runnable ```` (saved as a file at the root of the clone and run with
 *   `npx tsx`, as the guide tells its reader to);
 * - hidden set-up, an HTML comment that opens with `<!-- runnable` on a line of its own and holds
 *   shell lines: what the guide assumes its reader has done before (a service that has been used,
 *   then stopped), never a step the reader is told to paste.
 * All of a guide's blocks run in order in one bash with job control on (as in an interactive
 * shell, so `make run … &` then `kill %1` work), `set -euo pipefail`, so that variables carry from
 * block to block, at the root of the clone, with a fresh `DATA_DIR` and `PORT` on a free port.
 * The ports 8080–8099 the guides name (8080 is the service's default) are each moved to a free
 * port. `curl` fails on an HTTP error status (as `--fail-with-body`) unless the command asks for
 * `-f` itself or prints the status (`-w`), so a body the API refuses fails the run with the answer
 * printed. Jobs still running
 * after the last block are stopped.
 *
 * One-line directives, HTML comments anywhere in a guide:
 * - `<!-- runnable-expect: TEXT -->`: the output must contain TEXT;
 * - `<!-- runnable-requires: COMMAND -->`: the guide runs only where COMMAND succeeds; elsewhere
 *   it is skipped with a note, except in CI (CI=true), where that is a failure;
 * - `<!-- runnable-cleanup: COMMAND -->`: run before and after the guide (dropping a database the
 *   guide creates, say); its failure is ignored.
 *
 * A guide must leave no new untracked file in the clone (what it writes goes to ignored places);
 * files it adds under the ignored `backups/` are removed afterwards.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..');
const TIMEOUT_MS = 10 * 60 * 1000;

export interface Block {
  kind: 'sh' | 'ts' | 'hidden';
  line: number;
  text: string;
}

export interface Guide {
  file: string;
  blocks: Block[];
  expect: string[];
  requires: string[];
  cleanup: string[];
}

/** The runnable blocks and directives of a Markdown text. */
export function parseGuide(file: string, markdown: string): Guide {
  const guide: Guide = { file, blocks: [], expect: [], requires: [], cleanup: [] };
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i]!;
    const directive = /^\s*<!--\s*runnable-(expect|requires|cleanup):\s*(.*?)\s*-->\s*$/.exec(line);
    if (directive) {
      const [, name, value] = directive;
      if (name === 'expect') guide.expect.push(value!);
      else if (name === 'requires') guide.requires.push(value!);
      else guide.cleanup.push(value!);
      continue;
    }
    if (/^\s*<!--\s*runnable\s*$/.test(line)) {
      const start = i;
      const body: string[] = [];
      for (i += 1; i < lines.length && !/^\s*-->\s*$/.test(lines[i]!); i += 1) body.push(lines[i]!);
      if (i === lines.length) throw new Error(`${file}:${start + 1}: a hidden runnable block is not closed by a line '-->'`);
      guide.blocks.push({ kind: 'hidden', line: start + 1, text: body.join('\n') });
      continue;
    }
    const fence = /^(\s*)(`{3,}|~{3,})\s*(.*)$/.exec(line);
    if (!fence) continue;
    const [, indent, marks, info] = fence;
    const start = i;
    const body: string[] = [];
    const closing = new RegExp(`^\\s*${marks![0] === '`' ? '`' : '~'}{${marks!.length},}\\s*$`);
    for (i += 1; i < lines.length && !closing.test(lines[i]!); i += 1) {
      const content = lines[i]!;
      body.push(content.startsWith(indent!) ? content.slice(indent!.length) : content.trimStart());
    }
    const words = info!.trim().split(/\s+/);
    if (!words.includes('runnable')) continue;
    const language = words[0];
    if (language === 'sh' || language === 'bash') guide.blocks.push({ kind: 'sh', line: start + 1, text: body.join('\n') });
    else if (language === 'ts') guide.blocks.push({ kind: 'ts', line: start + 1, text: body.join('\n') });
    else throw new Error(`${file}:${start + 1}: a runnable block must be sh, bash or ts (got "${language}")`);
  }
  return guide;
}

/** Moves every port 8080–8099 the blocks name to the free port given for it. */
export function movePorts(text: string, ports: Map<string, number>): string {
  return text.replace(/\b80[89]\d\b/g, (port) => String(ports.get(port) ?? port));
}

/** A free TCP port on the loopback interface. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

// A curl that fails on an HTTP error status unless the command chose -f or -w itself; job clean-up at the end.
const PRELUDE = `set -euo pipefail
__docs_files=()
curl() {
  local a
  for a in "$@"; do
    case "$a" in --fail|--fail-with-body|-[a-zA-Z]*f*|-w|--write-out) command curl "$@"; return ;; esac
  done
  command curl --fail-with-body "$@"
}
__docs_stop_jobs() {
  local p
  for p in $(jobs -p); do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 1 40); do [ -z "$(jobs -pr)" ] && break; sleep 0.25; done
  for p in $(jobs -pr); do kill -KILL -- "-$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -f "\${__docs_files[@]}"
}
trap __docs_stop_jobs EXIT
trap 'exit 143' TERM INT
`;

/** The shell script that runs a guide's blocks in order. */
export function scriptOf(guide: Guide, ports: Map<string, number>): string {
  const parts = [PRELUDE];
  guide.blocks.forEach((block, n) => {
    const text = movePorts(block.text, ports);
    parts.push(`printf '\\n::: %s\\n' '${guide.file}:${block.line}${block.kind === 'hidden' ? ' (set-up)' : ''}'`);
    if (block.kind === 'ts') {
      const file = `.docs-check-${process.pid}-${n}.ts`;
      parts.push(`__docs_files+=(${file})`, `cat > ${file} <<'DOCS_CHECK_EOF'\n${text}\nDOCS_CHECK_EOF`, `npx tsx ${file}`);
    } else parts.push(text);
  });
  return `${parts.join('\n')}\n`;
}

function untracked(): Set<string> {
  const status = spawnSync('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: ROOT, encoding: 'utf8' });
  if (status.status !== 0) return new Set();
  return new Set(
    status.stdout
      .split('\n')
      .filter((l) => l.startsWith('?? '))
      .map((l) => l.slice(3)),
  );
}

function listBackups(): Set<string> {
  const dir = path.join(ROOT, 'backups');
  return new Set(fs.existsSync(dir) ? fs.readdirSync(dir) : []);
}

const sh = (command: string, env: NodeJS.ProcessEnv) => spawnSync('bash', ['-c', command], { cwd: ROOT, env, stdio: 'ignore' });

/** Runs one guide; resolves with what it printed, rejects with the reason and what it printed. */
export async function runGuide(guide: Guide): Promise<'ran' | 'skipped'> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-docs-'));
  const ports = new Map<string, number>();
  for (const block of guide.blocks) for (const [port] of block.text.matchAll(/\b80[89]\d\b/g)) ports.set(port, 0);
  ports.set('8080', 0);
  for (const port of ports.keys()) ports.set(port, await freePort());
  // The machine's environment, less what would change what the guide does (a database, a mode).
  const env: NodeJS.ProcessEnv = {};
  for (const name of ['PATH', 'HOME', 'USER', 'LANG', 'LC_ALL', 'TMPDIR', 'TERM', 'CI', 'NO_UPDATE_NOTIFIER'])
    if (process.env[name] !== undefined) env[name] = process.env[name];
  Object.assign(env, { PORT: String(ports.get('8080')), DATA_DIR: dataDir, REDOCLY_TELEMETRY: 'off' });

  for (const command of guide.requires) {
    if (sh(command, env).status !== 0) {
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (process.env.CI === 'true') throw new Error(`requires \`${command}\`, which failed`);
      console.log(`::: ${guide.file}: skipped (\`${command}\` failed here; CI requires it)`);
      return 'skipped';
    }
  }
  const before = untracked();
  const backups = listBackups();
  for (const command of guide.cleanup) sh(command, env);
  const script = scriptOf(guide, ports);
  let output = '';
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn('bash', ['-m', '-c', script], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const timer = setTimeout(() => child.kill('SIGTERM'), TIMEOUT_MS);
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve(status);
    });
  });
  for (const command of guide.cleanup) sh(command, env);
  for (const name of listBackups()) if (!backups.has(name)) fs.rmSync(path.join(ROOT, 'backups', name), { recursive: true, force: true });
  fs.rmSync(dataDir, { recursive: true, force: true });

  const problems: string[] = [];
  if (code !== 0) problems.push(`the blocks exited with ${code}`);
  for (const text of guide.expect) if (!output.includes(text)) problems.push(`the output lacks ${JSON.stringify(text)}`);
  const left = [...untracked()].filter((file) => !before.has(file));
  if (left.length > 0) problems.push(`it left files git does not ignore: ${left.join(', ')}`);
  if (problems.length > 0) {
    const log = path.join(ROOT, 'service.log');
    const service = fs.existsSync(log)
      ? `\n--- service.log (last 40 lines)\n${fs.readFileSync(log, 'utf8').split('\n').slice(-40).join('\n')}`
      : '';
    // bash -m without a terminal says so twice; job control still works as the guides need.
    const shown = output.replace(/^bash: (cannot set terminal process group|no job control in this shell).*\n/gm, '');
    throw new Error(`${problems.join('; ')}\n--- output\n${shown}${service}`);
  }
  return 'ran';
}

async function main(): Promise<void> {
  const named = (process.env.DOCS ?? '').split(/\s+/).filter(Boolean);
  const files =
    named.length > 0
      ? named
      : ['docs', 'docs/areas'].flatMap((dir) =>
          fs
            .readdirSync(path.join(ROOT, dir))
            .filter((f) => f.endsWith('.md'))
            .sort()
            .map((f) => `${dir}/${f}`),
        );
  const guides = files
    .map((file) => parseGuide(file, fs.readFileSync(path.resolve(ROOT, file), 'utf8')))
    .filter((g) => g.blocks.length > 0);
  let failed = 0;
  for (const guide of guides) {
    const started = Date.now();
    try {
      const outcome = await runGuide(guide);
      if (outcome === 'ran')
        console.log(`::: ${guide.file}: ok (${guide.blocks.length} blocks, ${((Date.now() - started) / 1000).toFixed(0)} s)`);
    } catch (error) {
      failed += 1;
      console.log(`::: ${guide.file}: FAILED: ${(error as Error).message}`);
    }
  }
  console.log(`runnable docs: ${guides.length - failed} of ${guides.length} guides passed`);
  if (failed > 0) process.exit(1);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
