/**
 * Where a server's CPU time went, from a profile written with BENCH_PROFILE_DIR (`--cpu-prof`):
 * each sample's time goes to the first phase found on its stack, from the running function
 * outwards (the kernel's write, the driver, the response, serialization, logging, validation…),
 * so that profiles (the service's, the peer's and the limit's) compare phase by phase.
 *   tsx bench/profile-summary.ts <profile> [requests served] [from] [to]
 * With the number of requests the process served, the figures are microseconds per request;
 * without, shares of its busy time. The profile covers the whole process, start-up included:
 * `from` and `to` (microseconds of the monotonic clock, which the profile's own times and
 * process.hrtime share) keep only the samples between them, the time B1 measured the process (it
 * prints the command with all four when BENCH_PROFILE_DIR is set).
 */
import fs from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The phases, tried in order against `<function> <script URL>` of each frame. */
const PHASES: Array<[RegExp, string]> = [
  [/^(writev|writeUtf8String|writeLatin1String|writeBuffer) /, 'socket writes (kernel)'],
  [/^\(garbage collector\) /, 'garbage collection'],
  [/postgres-date/, 'timestamp parsing'],
  [/^stringify /, 'JSON serialization'],
  [/pg-protocol|\/pg\/lib|pg-types|pg-pool/, 'database driver'],
  [/kysely|list-query|db\/index|bench\/lists/, 'query building and execution'],
  [/request-log|logger|winston|logform|prom-client|perf\/observe|tdigest/, 'access log and metrics'],
  [/\/jose\/|http\/auth|tokens\.js|rate-limit|capability-gate|roles\.js/, 'authentication and guards'],
  [/express-openapi-validator|\/ajv\/|text-guard|querystring|parseurl/, 'request validation'],
  [/\/areas\/|bench\/baseline|bench\/peer/, 'handlers and presenters'],
  [/\/helmet\/|node_modules\/cors\/|http\/cors/, 'helmet and CORS'],
  [/http\/handler|\/etag\/|^end node:_http_outgoing|_storeHeader|setHeader|_http_outgoing/, 'response and its headers'],
  [/router\/|express\/|body-parser|cookie-parser|http\/openapi/, 'routing and middleware'],
  [/_http_server|_http_common|_http_incoming/, 'request parsing'],
  [/modules\/(cjs|esm)|readFileUtf8|package_json|internalModule|compileFunction|bootstrap\//, 'start-up (module loading)'],
];

/** Each sample's time in microseconds of the busy phase it goes to, for the samples taken from `from` to `to`. */
function summarize(profile: Profile, from: number, to: number): Map<string, number> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const self = new Map<number, number>();
  let time = profile.startTime;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    time += delta;
    if (time >= from && time <= to) self.set(id, (self.get(id) ?? 0) + delta);
  });
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
  const [file, served, from, to] = process.argv.slice(2);
  if (!file) throw new Error('usage: tsx bench/profile-summary.ts <profile> [requests served] [from] [to]');
  const phases = summarize(JSON.parse(fs.readFileSync(file, 'utf8')) as Profile, Number(from ?? -Infinity), Number(to ?? Infinity));
  const busy = [...phases.values()].reduce((a, b) => a + b, 0);
  const requests = Number(served ?? 0);
  const shown = (micros: number) => (requests > 0 ? `${(micros / requests).toFixed(1)} µs` : `${((100 * micros) / busy).toFixed(1)} %`);
  console.log(`busy ${(busy / 1e6).toFixed(2)} s${requests > 0 ? `, ${shown(busy)} per request` : ''}`);
  for (const [phase, micros] of [...phases].sort((a, b) => b[1] - a[1])) console.log(`${shown(micros).padStart(9)}  ${phase}`);
}

main();
