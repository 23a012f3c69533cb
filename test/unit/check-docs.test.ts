import { movePorts, parseGuide, runGuide } from '../../scripts/check-docs';

/** scripts/check-docs.ts (`make docs-check`): what it reads from a guide, and how it judges a run. */
describe('the runner of the guides’ runnable blocks', () => {
  test('reads runnable sh and ts blocks (indented ones too), hidden set-up and directives; leaves other blocks', () => {
    const guide = parseGuide(
      'x.md',
      [
        '```sh',
        'echo not runnable',
        '```',
        '1. A step:',
        '   ```sh runnable',
        '   echo one',
        '   ```',
        '<!-- runnable',
        'echo set-up',
        '-->',
        '```ts runnable',
        "console.log('two');",
        '```',
        '<!-- runnable-expect: one -->',
        '<!-- runnable-requires: true -->',
        '<!-- runnable-cleanup: rm -f /tmp/nothing -->',
      ].join('\n'),
    );
    expect(guide.blocks).toEqual([
      { kind: 'sh', line: 5, text: 'echo one' },
      { kind: 'hidden', line: 8, text: 'echo set-up' },
      { kind: 'ts', line: 11, text: "console.log('two');" },
    ]);
    expect(guide).toMatchObject({ expect: ['one'], requires: ['true'], cleanup: ['rm -f /tmp/nothing'] });
    expect(() => parseGuide('y.md', '<!-- runnable\necho never closed')).toThrow(/not closed/);
    expect(() => parseGuide('z.md', '```python runnable\nprint(1)\n```')).toThrow(/must be sh, bash or ts/);
  });

  test('moves the ports 8080-8099 the blocks name, and no others', () => {
    const ports = new Map([
      ['8080', 41001],
      ['8091', 41002],
    ]);
    expect(movePorts('curl localhost:8080/x; listen(8091); psql -p 5432; 18080', ports)).toBe(
      'curl localhost:41001/x; listen(41002); psql -p 5432; 18080',
    );
  });

  test('passes a guide whose blocks succeed and print what it expects; fails one that does not', async () => {
    const guide = (text: string, expected: string[] = []) => ({ ...parseGuide('t.md', text), expect: expected });
    await expect(runGuide(guide('```sh runnable\nA=one\n```\n```sh runnable\necho "$A $PORT"\n```', ['one ']))).resolves.toBe('ran');
    await expect(runGuide(guide('```sh runnable\necho two\n```', ['three']))).rejects.toThrow(/the output lacks "three"/);
    await expect(runGuide(guide('```sh runnable\nfalse\necho after\n```'))).rejects.toThrow(/exited with 1/);
    // curl fails on an HTTP error status (a body the API refuses), unless the command prints the status.
    const server = [
      '```sh runnable',
      "node -e \"require('node:http').createServer((q, s) => s.writeHead(400).end('refused')).listen(8099, '127.0.0.1', () => console.log('up'))\" > /tmp/docs-check-$$.log &",
      'until grep -q up /tmp/docs-check-$$.log; do sleep 0.2; done',
      'curl -s -o /dev/null -w "%{http_code}\\n" localhost:8099/',
      'curl -s localhost:8099/',
      '```',
    ].join('\n');
    await expect(runGuide(guide(server, ['400']))).rejects.toThrow(/exited with 22[\s\S]*refused/);
  }, 60_000);
});
