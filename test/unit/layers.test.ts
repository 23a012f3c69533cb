import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { root } from '../helpers/process';

/**
 * The layering rule (`.dependency-cruiser.cjs`) run on a small tree of its own: a correct tree
 * passes, and each wrong-way import below fails with its rule's name, as `make layers` reports it.
 */
const cli = path.join(root, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
const run = promisify(execFile);

const correct: Record<string, string> = {
  'src/platform/errors.ts': 'export const notFound = 404;\n',
  'src/http/auth.ts': "import { notFound } from '../platform/errors.js';\nexport const auth = notFound;\n",
  'src/areas/notes/service.ts': "import { notFound } from '../../platform/errors.js';\nexport const notes = notFound;\n",
  'src/areas/notes/repository.ts': 'export const rows = 1;\n',
  'src/areas/notes/handlers.ts':
    "import { auth } from '../../http/auth.js';\nimport { notes } from './service.js';\nexport const h = auth + notes;\n",
  'src/areas/chat/service.ts': "import { notes } from '../notes/service.js';\nexport const chat = notes;\n",
};

async function cruise(extra: Record<string, string>): Promise<{ failed: boolean; output: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'layers-'));
  try {
    fs.writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'node16', moduleResolution: 'node16' } }),
    );
    for (const [file, text] of Object.entries({ ...correct, ...extra })) {
      fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      fs.writeFileSync(path.join(dir, file), text);
    }
    const args = [cli, 'src', '--config', path.join(root, '.dependency-cruiser.cjs'), '--output-type', 'err'];
    try {
      const { stdout } = await run(process.execPath, args, { cwd: dir });
      return { failed: false, output: stdout };
    } catch (error) {
      const { stdout, stderr } = error as { stdout: string; stderr: string };
      return { failed: true, output: stdout + stderr };
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('the layering rule', () => {
  it('passes a tree whose imports point one way', async () => {
    const { failed, output } = await cruise({});
    expect(output).toContain('no dependency violations');
    expect(failed).toBe(false);
  }, 60_000);

  it.each([
    [
      'platform imports http',
      'src/platform/errors.ts',
      "import '../http/auth.js';\nexport const notFound = 404;\n",
      'platform-is-the-bottom',
    ],
    ['http imports an area', 'src/http/auth.ts', "import '../areas/notes/service.js';\nexport const auth = 1;\n", 'http-knows-no-area'],
    [
      'a service imports http',
      'src/areas/notes/service.ts',
      "import '../../http/auth.js';\nexport const notes = 1;\n",
      'only-handlers-speak-http',
    ],
    [
      "an area uses another area's repository",
      'src/areas/chat/service.ts',
      "import '../notes/repository.js';\nexport const chat = 1;\n",
      'areas-meet-through-services',
    ],
    [
      'an import resolves to nothing',
      'src/platform/errors.ts',
      "import '../http/missing.js';\nexport const notFound = 404;\n",
      'resolvable-imports-only',
    ],
  ])(
    'fails when %s',
    async (_name, file, text, rule) => {
      const { failed, output } = await cruise({ [file]: text });
      expect(output).toContain(`error ${rule}:`);
      expect(failed).toBe(true);
    },
    60_000,
  );
});
