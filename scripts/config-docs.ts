/**
 * docs/configuration.md's tables come from the declarations in src/config/: `make config-docs`
 * writes them between the file's two markers (the prose around them is kept); `make
 * config-docs-check`, part of `make lint`, fails when the file differs from what it would write:
 * a variable declared but not documented, documented with another default, type or meaning, or
 * a rule missing.
 */
import fs from 'node:fs';
import path from 'node:path';
import { topics } from '../src/config';
import { variablesOf } from '../src/config/declare';

export const DOC = path.join(__dirname, '..', 'docs', 'configuration.md');
export const BEGIN = '<!-- generated from src/config/ by `make config-docs`: edit the declarations, not the tables -->';
export const END = '<!-- end of the generated tables -->';

/** Text for one table cell: a `|` would end the cell. */
const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
const code = (name: string) => `\`${name}\``;
/** Plain text (a rule's problem) in a cell: `<key id>` would read as an HTML tag. */
const plain = (text: string) => cell(text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;'));

/** The tables: one per topic, of its variables, then one of the cross-field rules. */
export function renderTables(): string {
  const lines: string[] = [];
  for (const topic of topics) {
    lines.push(`## ${topic.title}`, '', '| variable | default | accepts | meaning |', '|---|---|---|---|');
    for (const variable of variablesOf(topic.tree)) {
      const name = code(variable.name) + (variable.spec.alias ? ` (deprecated alias ${code(variable.spec.alias)})` : '');
      lines.push(`| ${name} | ${cell(variable.documentedDefault)} | ${cell(variable.accepts)} | ${cell(variable.spec.doc)} |`);
    }
    lines.push('');
  }
  lines.push('## Cross-field rules', '', '| rule | variables | requires |', '|---|---|---|');
  for (const topic of topics) {
    for (const [name, rule] of Object.entries(topic.rules)) {
      lines.push(`| ${code(name)} | ${rule.variables.map(code).join(', ')} | ${plain(rule.requires)} |`);
    }
  }
  return lines.join('\n');
}

/** The document with its generated part rewritten. */
export function render(document: string): string {
  const begin = document.indexOf(BEGIN);
  const end = document.indexOf(END);
  if (begin < 0 || end < begin) throw new Error(`docs/configuration.md has lost its markers:\n${BEGIN}\n…\n${END}`);
  return `${document.slice(0, begin + BEGIN.length)}\n\n${renderTables()}\n\n${document.slice(end)}`;
}

function main(): void {
  const current = fs.readFileSync(DOC, 'utf8');
  const next = render(current);
  if (!process.argv.includes('--check')) {
    if (next !== current) fs.writeFileSync(DOC, next);
    return;
  }
  if (next === current) return;
  const [was, is] = [current.split('\n'), next.split('\n')];
  const first = is.findIndex((line, i) => line !== was[i]);
  console.error(
    `docs/configuration.md differs from the declarations in src/config/ (from line ${first + 1}):\n` +
      `  documented: ${was[first] ?? '(nothing)'}\n  declared:   ${is[first] ?? '(nothing)'}\n` +
      "Run 'make config-docs' and commit docs/configuration.md.",
  );
  process.exit(1);
}

if (require.main === module) main();
