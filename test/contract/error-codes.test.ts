import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { errors } from '../../src/platform/errors';

/**
 * The error codes the document promises are the codes the service can emit: the catalogue in
 * `info.description` (code and status) and the `ErrorResponse.code` enum, against every error
 * code the source sends. A failure lists each code missing from a side, by name.
 */
const root = path.join(__dirname, '..', '..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const file = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return sourceFiles(file);
    return entry.name.endsWith('.ts') ? [file] : [];
  });
}

interface Emitted {
  status: number;
  where: string;
}

/** Every `new ApiError(<status>, '<code>'` and every hand-written `.status(<status>)…json({ …code: '<code>' })` under src/. */
function emittedCodes(): Map<string, Emitted[]> {
  const found = new Map<string, Emitted[]>();
  const add = (code: string, status: number, where: string) => found.set(code, [...(found.get(code) ?? []), { status, where }]);
  for (const file of sourceFiles('src')) {
    const text = read(file);
    for (const m of text.matchAll(/new ApiError\(\s*(\d{3}),\s*'([a-z_]+)'/g)) add(m[2]!, Number(m[1]), file);
    for (const m of text.matchAll(/\.status\((\d{3})\)[^;]*?\.json\(\{[^}]*\bcode: '([a-z_]+)'/g)) add(m[2]!, Number(m[1]), file);
  }
  return found;
}

/** The catalogue table of the document's "Errors" section: `| 400 | \`invalid_request\`, … |`. */
function catalogue(): Map<string, number> {
  const description = (parse(read('openapi/openapi.yaml')) as { info: { description: string } }).info.description;
  const section = description.split('## Errors')[1]?.split('\n## ')[0] ?? '';
  const codes = new Map<string, number>();
  for (const row of section.matchAll(/^\|\s*(\d{3})\s*\|(.*)\|\s*$/gm)) {
    for (const code of row[2]!.matchAll(/`([a-z_]+)`/g)) codes.set(code[1]!, Number(row[1]));
  }
  return codes;
}

function schemaEnum(): string[] {
  const common = parse(read('openapi/components/common.yaml')) as {
    ErrorResponse: { properties: { code: { enum?: string[]; description: string } } };
  };
  return common.ErrorResponse.properties.code.enum ?? [];
}

describe('the error-code catalogue', () => {
  const emitted = emittedCodes();

  test('the scan finds every factory of the catalogue in src/platform/errors.ts', () => {
    const inErrorsFile = [...read('src/platform/errors.ts').matchAll(/new ApiError\(\s*\d{3},\s*'[a-z_]+'/g)].length;
    expect(inErrorsFile).toBe(Object.keys(errors).length);
    expect(emitted.size).toBeGreaterThanOrEqual(Object.keys(errors).length - 1);
  });

  test('info.description and ErrorResponse.code list exactly the codes the service emits, with their statuses', () => {
    const listed = catalogue();
    const enumerated = new Set(schemaEnum());
    const problems: string[] = [];
    for (const [code, uses] of [...emitted].sort()) {
      const statuses = [...new Set(uses.map((u) => u.status))];
      const where = [...new Set(uses.map((u) => u.where))].join(', ');
      if (statuses.length > 1)
        problems.push(`${code} is emitted with several statuses (${statuses.join(', ')}) in ${where}: one code, one status`);
      if (!listed.has(code))
        problems.push(
          `${code} (${statuses.join('/')}, emitted in ${where}) is missing from the table in info.description (openapi/openapi.yaml, "## Errors")`,
        );
      else if (!statuses.includes(listed.get(code)!)) {
        problems.push(`${code} is listed under ${listed.get(code)} in info.description but emitted with ${statuses.join('/')} in ${where}`);
      }
      if (!enumerated.has(code))
        problems.push(
          `${code} (${statuses.join('/')}, emitted in ${where}) is missing from the ErrorResponse.code enum (openapi/components/common.yaml)`,
        );
    }
    for (const [code, status] of listed) {
      if (!emitted.has(code)) problems.push(`${code} (${status}) is in the table in info.description but nothing in src/ emits it`);
    }
    for (const code of enumerated) {
      if (!emitted.has(code)) problems.push(`${code} is in the ErrorResponse.code enum but nothing in src/ emits it`);
    }
    expect(problems).toEqual([]);
  });

  test('the ErrorResponse.code enum tells clients to tolerate new values', () => {
    const common = parse(read('openapi/components/common.yaml')) as { ErrorResponse: { properties: { code: { description: string } } } };
    expect(common.ErrorResponse.properties.code.description).toMatch(/tolerate new values/);
  });
});
