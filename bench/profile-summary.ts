/**
 * Where a server's CPU time went, from a profile written with BENCH_PROFILE_DIR (`--cpu-prof`):
 * each sample's time goes to the first phase found on its stack, from the running function
 * outwards (the kernel's write, the driver, the response, serialization, logging, validation…),
 * so that two profiles (the service's and the limit's) compare phase by phase.
 *   tsx bench/profile-summary.ts <profile> [requests served]
 * With the number of requests the process served, the figures are microseconds per request;
 * without, shares of its busy time. The profile covers the whole process, start-up included.
 */
import fs from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The phases, tried in order against `<function> <script URL>` of each frame. */
const PHASES: Array<[RegExp, string]> = [
  [/^(writev|writeUtf8String|writeLatin1String|writeBuffer) /, 'socket writes (kernel)'],
  [/^\(garbage collector\) /, 'garbage collection'],
  [/timestamps\.js/, 'timestamp parsing'],
  [/fast-json-stringify|json-writer|^anonymous\d* $/, 'JSON serialization'],
  [/pg-protocol|\/pg\/lib|pg-types|pg-pool/, 'database driver'],
  [/kysely|list-query|db\/index/, 'query building and execution'],
  [/request-log|logger|prom-client|perf\/observe|tdigest/, 'access log and metrics'],
  [/request-validation|text-guard|querystring|parseurl/, 'request validation'],
  [/http\/auth|tokens\.js|rate-limit|capability-gate|roles\.js/, 'authentication and guards'],
  [/\/areas\/|bench\/baseline/, 'handlers and presenters'],
  [/http\/handler|sendJsonText|^end node:_http_outgoing|_storeHeader|setHeader|_http_outgoing/, 'response and its headers'],
  [/router\/|express\/|path-dispatch|http\/chain|http\/openapi|security-headers|cors\.js|cookie-parser/, 'routing and middleware'],
  [/_http_server|_http_common|_http_incoming/, 'request parsing'],
  [/modules\/(cjs|esm)|readFileUtf8|package_json|internalModule|compileFunction|bootstrap\//, 'start-up (module loading)'],
];

function summarize(profile: Profile): Map<string, number> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const phases = new Map<string, number>();
  for (const [id, micros] of self) {
    if (byId.get(id)?.callFrame.functionName === '(idle)') continue;
    let phase: string | undefined;
    for (let at: number | undefined = id; at !== undefined && phase === undefined; at = parent.get(at)) {
      const frame = byId.get(at)?.callFrame;
      const name = `${frame?.functionName ?? ''} ${frame?.url ?? ''}`;
      phase = PHASES.find(([pattern]) => pattern.test(name))?.[1];
    }
    phase ??= 'other (Node internals, promises, timers)';
    phases.set(phase, (phases.get(phase) ?? 0) + micros);
  }
  return phases;
}

function main(): void {
  const [file, served] = process.argv.slice(2);
  if (!file) throw new Error('usage: tsx bench/profile-summary.ts <profile> [requests served]');
  const phases = summarize(JSON.parse(fs.readFileSync(file, 'utf8')) as Profile);
  const busy = [...phases.values()].reduce((a, b) => a + b, 0);
  const requests = Number(served ?? 0);
  const shown = (micros: number) => (requests > 0 ? `${(micros / requests).toFixed(1)} µs` : `${((100 * micros) / busy).toFixed(1)} %`);
  console.log(`busy ${(busy / 1e6).toFixed(2)} s${requests > 0 ? `, ${shown(busy)} per request` : ''}`);
  for (const [phase, micros] of [...phases].sort((a, b) => b[1] - a[1])) console.log(`${shown(micros).padStart(9)}  ${phase}`);
}

main();
