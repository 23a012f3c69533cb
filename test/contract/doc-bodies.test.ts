import fs from 'node:fs';
import path from 'node:path';
import Ajv, { type ValidateFunction } from 'ajv';
import { loadApiDocument } from '../../src/http/openapi';

/**
 * Every `curl` to the service in the guides (README.md, docs/*.md, docs/areas/*.md: runnable
 * blocks or not) names an operation of the document, with query parameters it declares and a JSON
 * body its request schema accepts, so a body copied from a guide is one the API takes. Shell
 * variables in a body (`"$CONV"`) stand for ids. `make docs-check` then runs the runnable ones.
 */
const ROOT = path.join(__dirname, '..', '..');
const doc = loadApiDocument() as unknown as {
  paths: Record<string, Record<string, Operation>>;
  components: { parameters: Record<string, Parameter> };
};
interface Parameter {
  name: string;
  in: string;
}
interface Operation {
  parameters?: Array<Parameter | { $ref: string }>;
  requestBody?: { content: Record<string, { schema: object }> };
}

const GUIDES = [
  'README.md',
  ...['docs', 'docs/areas'].flatMap((dir) =>
    fs
      .readdirSync(path.join(ROOT, dir))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `${dir}/${f}`),
  ),
];
const AREA_GUIDES = GUIDES.filter((g) => g.startsWith('docs/areas/'));

/** What a shell variable stands for in a body or a URL: an id, as the document's examples write one. */
const VARIABLE = '01936d2e-7b1a-7c3e-9f00-5a2b9c4d1e20';

/** The shell text of a guide's sh/bash blocks (fenced, or hidden `<!-- runnable` set-up). */
function shellBlocks(markdown: string): string[] {
  const blocks: string[] = [];
  const fence = /^([ \t]*)(```|~~~)\s*(sh|bash)\b[^\n]*\n([\s\S]*?)^[ \t]*\2[ \t]*$/gm;
  for (const m of markdown.matchAll(fence)) {
    const indent = m[1]!;
    blocks.push(
      m[4]!
        .split('\n')
        .map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l))
        .join('\n'),
    );
  }
  for (const m of markdown.matchAll(/^[ \t]*<!--\s*runnable[ \t]*\n([\s\S]*?)^[ \t]*-->/gm)) blocks.push(m[1]!);
  return blocks;
}

type Token = { op: string } | { word: string };

/** Shell words and operators, quotes removed and variables replaced (enough for the guides' commands). */
export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let word: string | null = null;
  const push = () => {
    if (word !== null) tokens.push({ word });
    word = null;
  };
  const variableAt = (i: number): number => {
    // i is at '$': returns the index after the variable, its braces or its command substitution.
    if (text[i + 1] === '{') return text.indexOf('}', i) + 1;
    if (text[i + 1] === '(') {
      let depth = 0;
      for (let j = i + 1; j < text.length; j += 1) {
        if (text[j] === '(') depth += 1;
        else if (text[j] === ')' && --depth === 0) return j + 1;
      }
      return text.length;
    }
    const m = /^[A-Za-z_][A-Za-z0-9_]*|^[0-9#?@*$!-]/.exec(text.slice(i + 1));
    return m ? i + 1 + m[0].length : i + 1;
  };
  for (let i = 0; i < text.length;) {
    const c = text[i]!;
    if (c === '\\' && text[i + 1] === '\n') i += 2;
    else if (c === ' ' || c === '\t') {
      push();
      i += 1;
    } else if (c === '\n') {
      push();
      tokens.push({ op: ';' });
      i += 1;
    } else if (c === '#' && word === null) {
      while (i < text.length && text[i] !== '\n') i += 1;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      word = (word ?? '') + text.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      let value = '';
      for (i += 1; i < text.length && text[i] !== '"';) {
        if (text[i] === '\\' && '"\\$`\n'.includes(text[i + 1]!)) {
          if (text[i + 1] !== '\n') value += text[i + 1];
          i += 2;
        } else if (text[i] === '$' && i + 1 < text.length && /[A-Za-z_{(]/.test(text[i + 1]!)) {
          value += VARIABLE;
          i = variableAt(i);
        } else value += text[i++];
      }
      word = (word ?? '') + value;
      i += 1;
    } else if (c === '$' && text[i + 1] === '(') {
      push();
      tokens.push({ op: '(' });
      i += 2;
    } else if (c === '$' && /[A-Za-z_{]/.test(text[i + 1] ?? '')) {
      word = (word ?? '') + VARIABLE;
      i = variableAt(i);
    } else if ('|&;()<>'.includes(c)) {
      push();
      tokens.push({ op: c });
      i += 1;
    } else if (c === '\\') {
      word = (word ?? '') + (text[i + 1] ?? '');
      i += 2;
    } else {
      word = (word ?? '') + c;
      i += 1;
    }
  }
  push();
  return tokens;
}

interface Call {
  guide: string;
  method: string;
  url: URL;
  body: string | null;
  command: string;
}

const TAKES_VALUE = new Set([
  '-X',
  '--request',
  '-H',
  '--header',
  '-d',
  '--data',
  '--data-raw',
  '--data-binary',
  '-o',
  '-w',
  '-c',
  '-b',
  '-D',
  '-u',
  '-e',
  '--write-out',
  '--output',
]);

/** The guides' curl commands to the service (localhost:8080). */
function calls(): Call[] {
  const found: Call[] = [];
  for (const guide of GUIDES) {
    for (const block of shellBlocks(fs.readFileSync(path.join(ROOT, guide), 'utf8'))) {
      const tokens = tokenize(block);
      for (let i = 0; i < tokens.length; i += 1) {
        const t = tokens[i]!;
        if (!('word' in t) || t.word !== 'curl') continue;
        const words: string[] = [];
        for (i += 1; i < tokens.length && 'word' in tokens[i]!; i += 1) words.push((tokens[i] as { word: string }).word);
        let method: string | null = null;
        let body: string | null = null;
        let url: URL | null = null;
        for (let w = 0; w < words.length; w += 1) {
          const word = words[w]!;
          if (TAKES_VALUE.has(word)) {
            const value = words[++w]!;
            if (word === '-X' || word === '--request') method = value;
            if (word.startsWith('-d') || word.startsWith('--data')) body = value;
          } else if (/^(https?:\/\/)?(localhost|127\.0\.0\.1):8080\//.test(word)) {
            url = new URL(word.startsWith('http') ? word : `http://${word}`);
          }
        }
        if (url) found.push({ guide, method: method ?? (body !== null ? 'POST' : 'GET'), url, body, command: `curl ${words.join(' ')}` });
      }
    }
  }
  return found;
}

/** The document's operation for a method and a concrete path, templates (`{environmentId}`) matched. */
function operationOf(method: string, pathname: string): Operation | undefined {
  for (const [template, item] of Object.entries(doc.paths)) {
    const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (pattern.test(pathname)) return item[method.toLowerCase()];
  }
  return undefined;
}

const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
const validators = new Map<object, ValidateFunction>();
/** A validator of a request schema, its `#/components/…` references resolved in the document. */
function validatorOf(schema: object): ValidateFunction {
  let validate = validators.get(schema);
  if (!validate) {
    validate = ajv.compile({ ...schema, components: doc.components });
    validators.set(schema, validate);
  }
  return validate;
}

const all = calls();

describe('the guides’ requests', () => {
  test('the guides hold curl commands to the service', () => {
    expect(all.length).toBeGreaterThan(50);
  });

  test.each(AREA_GUIDES)('%s gives at least one request body to copy', (guide) => {
    expect(all.filter((c) => c.guide === guide && c.body !== null && c.body.startsWith('{')).length).toBeGreaterThan(0);
  });

  test('each names an operation of the document, with declared query parameters and a body its schema accepts', () => {
    const problems: string[] = [];
    for (const call of all) {
      const where = `${call.guide}: ${call.command.slice(0, 160)}`;
      if (!call.url.pathname.startsWith('/api/') && !call.url.pathname.startsWith('/auth/')) continue; // health, docs, callbacks
      const operation = operationOf(call.method, call.url.pathname);
      if (!operation) {
        problems.push(`${where}\n  no operation ${call.method} ${call.url.pathname}`);
        continue;
      }
      const declared = new Set(
        (operation.parameters ?? [])
          .map((p) => ('$ref' in p ? doc.components.parameters[p.$ref.split('/').pop()!]! : p))
          .filter((p) => p.in === 'query')
          .map((p) => p.name),
      );
      for (const name of call.url.searchParams.keys())
        if (!declared.has(name)) problems.push(`${where}\n  undeclared query parameter ${name}`);
      if (call.body === null || call.body.startsWith('@')) continue;
      const schema = operation.requestBody?.content['application/json']?.schema;
      if (!schema) {
        problems.push(`${where}\n  ${call.method} ${call.url.pathname} takes no JSON body`);
        continue;
      }
      let body: unknown;
      try {
        body = JSON.parse(call.body);
      } catch (error) {
        problems.push(`${where}\n  the body is not JSON: ${(error as Error).message}`);
        continue;
      }
      const validate = validatorOf(schema);
      if (!validate(body)) problems.push(`${where}\n  ${ajv.errorsText(validate.errors)}`);
    }
    expect(problems).toEqual([]);
  });
});

test('the tokenizer reads the quoting the guides use', () => {
  const words = (text: string) => tokenize(text).flatMap((t) => ('word' in t ? [t.word] : []));
  expect(words(`curl -d '{"a":"'"$X"'"}' -H "A: $Y" \\\n  "{\\"b\\":\\"$Z\\"}"`)).toEqual([
    'curl',
    '-d',
    `{"a":"${VARIABLE}"}`,
    '-H',
    `A: ${VARIABLE}`,
    `{"b":"${VARIABLE}"}`,
  ]);
});
