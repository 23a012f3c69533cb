import { calendarMonth, MICRO, spendingOf, subscriptionPeriod } from '../../src/areas/billing/service';
import { ConfigError, loadConfig } from '../../src/config';

const period = { start: new Date(Date.UTC(2026, 10, 1)), end: new Date(Date.UTC(2026, 11, 1)) };
const budget = (
  fields: Partial<{ balance_cents: number; carry_micro_cents: number; period_spent_micro_cents: number; period_start: Date | null }>,
) => ({
  user_id: 'u',
  balance_cents: 0,
  carry_micro_cents: 0,
  period_spent_micro_cents: 0,
  period_start: period.start,
  updated_at: new Date(),
  ...fields,
});
const plan = (monthlyBudgetCents: number | null) => ({ monthlyBudgetCents, storageBytes: null, automations: null });

describe('spending arithmetic', () => {
  test('unlimited plan without a limit: nothing is ever exhausted', () => {
    expect(spendingOf(budget({ period_spent_micro_cents: 9e12 }), plan(null), null, period)).toMatchObject({
      allowanceRemainingMicro: null,
      availableMicro: null,
    });
  });

  test('allowance, then balance less the fraction owed', () => {
    const s = spendingOf(
      budget({ balance_cents: 10, carry_micro_cents: 400_000, period_spent_micro_cents: 150 * MICRO }),
      plan(200),
      null,
      period,
    );
    expect(s).toEqual({
      spentMicro: 150 * MICRO,
      allowanceRemainingMicro: 50 * MICRO,
      balanceCents: 10,
      limitCents: null,
      availableMicro: 60 * MICRO - 400_000,
    });
  });

  test('a new period starts the spending again', () => {
    const s = spendingOf(
      budget({ period_spent_micro_cents: 500 * MICRO, period_start: new Date(Date.UTC(2026, 9, 1)) }),
      plan(200),
      null,
      period,
    );
    expect(s).toMatchObject({ spentMicro: 0, allowanceRemainingMicro: 200 * MICRO, availableMicro: 200 * MICRO });
  });

  test('the user’s limit caps what is available, also on an unlimited plan', () => {
    expect(spendingOf(budget({ period_spent_micro_cents: 30 * MICRO }), plan(null), 50, period).availableMicro).toBe(20 * MICRO);
    expect(spendingOf(budget({ balance_cents: 1000 }), plan(0), 5, period).availableMicro).toBe(5 * MICRO);
    expect(spendingOf(undefined, plan(0), null, period).availableMicro).toBe(0);
  });
});

describe('periods', () => {
  test('the calendar month in UTC', () => {
    expect(calendarMonth(new Date(Date.UTC(2026, 11, 31, 23, 59)))).toEqual({
      start: new Date(Date.UTC(2026, 11, 1)),
      end: new Date(Date.UTC(2027, 0, 1)),
    });
  });

  test('a subscription period carried forward while the renewal is late', () => {
    const start = new Date(Date.UTC(2026, 10, 1));
    const end = new Date(Date.UTC(2026, 10, 31));
    expect(subscriptionPeriod(start, end, new Date(Date.UTC(2026, 10, 15)))).toEqual({ start, end });
    const later = subscriptionPeriod(start, end, new Date(Date.UTC(2027, 0, 5)));
    expect(later).toEqual({ start: new Date(Date.UTC(2026, 11, 31)), end: new Date(Date.UTC(2027, 0, 30)) });
  });
});

describe('billing configuration', () => {
  test('plans, entitlements and the provider settings', () => {
    const config = loadConfig({
      BILLING_PLANS: JSON.stringify({ pro: { priceIds: ['price_a', 'price_b'], monthlyBudgetCents: 2000, storage: '10gb' } }),
      ENTITLEMENT_MONTHLY_BUDGET_CENTS: '100',
      ENTITLEMENT_STORAGE: '5mb',
      STRIPE_WEBHOOK_SECRET: 'whsec_abc',
    });
    expect(config.billing).toEqual({
      currency: 'usd',
      defaultEntitlements: { monthlyBudgetCents: 100, storageBytes: 5 * 1024 ** 2, automations: null },
      plans: [
        {
          id: 'pro',
          priceIds: ['price_a', 'price_b'],
          entitlements: { monthlyBudgetCents: 2000, storageBytes: 10 * 1024 ** 3, automations: null },
        },
      ],
      stripe: { webhookSecret: 'whsec_abc', toleranceSeconds: 300 },
    });
  });

  test.each([
    ['BILLING_PLANS', 'not json', 'must be a JSON object'],
    ['BILLING_PLANS', '[]', 'JSON object of plan ids'],
    ['BILLING_PLANS', '{"free":{"priceIds":["p"]}}', 'other than free and self_hosted'],
    ['BILLING_PLANS', '{"pro":{"priceIds":[]}}', 'needs priceIds'],
    ['BILLING_PLANS', '{"pro":{"priceIds":["p"],"automations":-1}}', 'automations must be a whole number'],
    ['BILLING_PLANS', '{"pro":{"priceIds":["p"],"storage":"lots"}}', 'storage must be a size'],
    ['BILLING_PLANS', '{"a":{"priceIds":["p"]},"b":{"priceIds":["p"]}}', 'more than one plan'],
    ['STRIPE_WEBHOOK_SECRET', 'sk_live_123', 'whsec_'],
    ['BILLING_CURRENCY', 'USD', 'ISO 4217'],
    ['ENTITLEMENT_STORAGE', 'big', 'ENTITLEMENT_STORAGE must be a size'],
  ])('%s=%s is refused', (name, value, message) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(message);
  });
});
