/**
 * The layering rule (docs/architecture.md): http → areas → platform, one way. `make lint` and CI
 * run it; a wrong-way import fails the build.
 */
module.exports = {
  forbidden: [
    {
      name: 'platform-is-the-bottom',
      comment: 'platform/ is shared machinery: it imports no http/, no area, and not the whole configuration (src/config/).',
      severity: 'error',
      from: { path: '^src/platform/' },
      to: { path: ['^src/http/', '^src/areas/', '^src/config/', '^src/app\\.ts$', '^src/composition/'] },
    },
    {
      name: 'http-knows-no-area',
      comment: 'http/ depends on small interfaces that the entry wires, never on an area.',
      severity: 'error',
      from: { path: '^src/http/' },
      to: { path: ['^src/areas/', '^src/config/', '^src/app\\.ts$', '^src/composition/'] },
    },
    {
      name: 'areas-take-their-settings-when-composed',
      comment: 'An area receives what it needs from the composition; it does not read the configuration.',
      severity: 'error',
      from: { path: '^src/areas/' },
      to: { path: ['^src/config/', '^src/app\\.ts$', '^src/composition/'] },
    },
    {
      name: 'only-handlers-speak-http',
      comment: "Services, repositories and presenters know nothing of HTTP; only an area's handlers (and its routes) do.",
      severity: 'error',
      from: { path: '^src/areas/[^/]+/', pathNot: '^src/areas/[^/]+/(handlers|.*-route)\\.ts$' },
      to: { path: '^src/http/' },
    },
    {
      name: 'areas-meet-through-services',
      comment: "An area uses another area through that area's service (or its exported types), never its repository or internals.",
      severity: 'error',
      from: { path: '^src/areas/([^/]+)/' },
      to: { path: '^src/areas/', pathNot: ['^src/areas/$1/', '^src/areas/[^/]+/service\\.ts$'] },
    },
    {
      name: 'migrations-are-frozen',
      comment: 'A migration takes Kysely<any> and imports no application code.',
      severity: 'error',
      from: { path: '^src/platform/db/migrations/' },
      to: { path: '^src/', pathNot: '^src/platform/db/migrations/' },
    },
    {
      name: 'no-test-code-in-src',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^test/' },
    },
    {
      name: 'resolvable-imports-only',
      comment: 'An import the cruiser cannot resolve would escape every rule above, so it fails too.',
      severity: 'error',
      from: { path: '^src/' },
      to: { couldNotResolve: true },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    // Resolve packages' subpath exports as Node and tsc do, so that they count as resolved.
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
    exclude: { path: '^(node_modules|dist)/' },
  },
};
