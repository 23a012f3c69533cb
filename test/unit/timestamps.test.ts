import fc from 'fast-check';
import pg from 'pg';
import { parseTimestamptz } from '../../src/platform/db/timestamps';

// pg's own parser, as the service's fast path must agree with it (read before any override).
const general = (text: string) => (pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text') as (t: string) => unknown)(text);
const pad = (value: number, width: number) => String(value).padStart(width, '0');

describe('parseTimestamptz', () => {
  it('agrees with pg on every form Postgres sends with the ISO date style', () => {
    fc.assert(
      fc.property(
        fc.date({ min: new Date('1000-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true }),
        fc.option(fc.integer({ min: 1, max: 999_999 }), { nil: undefined }),
        fc.integer({ min: -15 * 3600, max: 15 * 3600 }),
        fc.constantFrom('h', 'hm', 'hms'),
        (date, micros, offsetSeconds, offsetForm) => {
          const local = new Date(date.getTime() + offsetSeconds * 1000);
          const absolute = Math.abs(offsetSeconds);
          let zone = `${offsetSeconds < 0 ? '-' : '+'}${pad(Math.floor(absolute / 3600), 2)}`;
          if (offsetForm !== 'h' || absolute % 3600 !== 0) zone += `:${pad(Math.floor(absolute / 60) % 60, 2)}`;
          if (offsetForm === 'hms' || absolute % 60 !== 0) zone += `:${pad(absolute % 60, 2)}`;
          const fraction = micros === undefined ? '' : `.${pad(micros, 6).replace(/0+$/, '')}`;
          const text =
            `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1, 2)}-${pad(local.getUTCDate(), 2)} ` +
            `${pad(local.getUTCHours(), 2)}:${pad(local.getUTCMinutes(), 2)}:${pad(local.getUTCSeconds(), 2)}${fraction}${zone}`;
          const expected = general(text) as Date;
          const actual = parseTimestamptz(text) as Date;
          expect(actual).toBeInstanceOf(Date);
          expect(actual.getTime()).toBe(expected.getTime());
        },
      ),
      { numRuns: 5000 },
    );
  });

  it.each([
    'infinity',
    '-infinity',
    '0044-03-15 12:00:00+00 BC',
    '0099-01-01 00:00:00+00',
    '12345-01-01 00:00:00+00',
    '2026-11-26 11:49:40.5+05:30',
    '2026-11-26 11:49:40+05:30:15',
    '2026-11-26 11:49:40Z',
    '2026-11-26 11:49:40+0',
    '2026-11-26 11:49:40+05:3',
    '2026-11-26T11:49:40+00',
  ])('gives %s the value pg gives it', (text) => {
    const expected = general(text);
    const actual = parseTimestamptz(text);
    if (expected instanceof Date) expect((actual as Date).getTime()).toEqual(expected.getTime());
    else expect(actual).toEqual(expected);
  });
});
