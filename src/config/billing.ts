import type { Entitlements, Plan } from '../areas/billing/service';
import { topic, variable } from './declare';
import { bool, int, matching, oneOf, parsed, size, sizeInBytes, text } from './kinds';

const PLAN_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/**
 * BILLING_PLANS: a JSON object of plan id → `{ priceIds, monthlyBudgetCents, storage, automations }`
 * (the last three optional: absent is unlimited; storage is a size such as "10gb").
 */
const plans = parsed('JSON object of plan id → plan', (raw, problem): Plan[] => {
  let parsedJson: unknown;
  try {
    parsedJson = JSON.parse(raw);
  } catch {
    problem('must be a JSON object such as {"pro":{"priceIds":["price_123"],"monthlyBudgetCents":2000,"storage":"10gb","automations":50}}');
    return [];
  }
  if (typeof parsedJson !== 'object' || parsedJson === null || Array.isArray(parsedJson)) {
    problem('must be a JSON object of plan ids');
    return [];
  }
  const result: Plan[] = [];
  for (const [id, value] of Object.entries(parsedJson as Record<string, unknown>)) {
    const plan = (value ?? {}) as Record<string, unknown>;
    if (!PLAN_ID.test(id) || id === 'free' || id === 'self_hosted')
      problem(`plan ids are lower-case words other than free and self_hosted (got "${id}")`);
    const priceIds = plan.priceIds;
    if (!Array.isArray(priceIds) || priceIds.length === 0 || !priceIds.every((p) => typeof p === 'string' && p.length > 0)) {
      problem(`plan "${id}" needs priceIds: a non-empty list of the provider's price ids`);
    }
    const count = (field: string): number | null => {
      const v = plan[field];
      if (v === undefined || v === null) return null;
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) problem(`plan "${id}": ${field} must be a whole number ≥ 0`);
      return Number(v);
    };
    let storageBytes: number | null = null;
    if (plan.storage !== undefined && plan.storage !== null) {
      storageBytes = typeof plan.storage === 'string' ? sizeInBytes(plan.storage) : null;
      if (storageBytes === null) problem(`plan "${id}": storage must be a size such as "10gb"`);
    }
    result.push({
      id,
      priceIds: Array.isArray(priceIds) ? priceIds.map(String) : [],
      entitlements: { monthlyBudgetCents: count('monthlyBudgetCents'), storageBytes, automations: count('automations') },
    });
  }
  const prices = result.flatMap((p) => p.priceIds);
  if (new Set(prices).size !== prices.length) problem('lists a price id under more than one plan');
  return result;
});

/** The capability flags' defaults, and billing (src/areas/billing). */
export const billing = topic('Capabilities and billing', {
  capabilities: {
    automations: variable('CAPABILITY_AUTOMATIONS', bool(), { default: 'true', doc: 'default of the `automations` flag' }),
    billing: variable('CAPABILITY_BILLING', bool(), { default: 'false', doc: 'default of the `billing` flag' }),
    vectorSearch: variable('CAPABILITY_VECTOR_SEARCH', bool(), { default: 'true', doc: 'default of the `vectorSearch` flag' }),
    byok: variable('CAPABILITY_BYOK', bool(), {
      default: 'true',
      doc: 'default of the `byok` flag: users may connect their own model providers ([models](areas/models.md))',
    }),
    mcp: variable('CAPABILITY_MCP', bool(), {
      default: 'true',
      doc: 'default of the `mcp` flag: users may connect MCP servers and models may call their tools ([MCP servers](areas/mcp-servers.md))',
    }),
    integrations: variable('CAPABILITY_INTEGRATIONS', bool(), {
      default: 'true',
      doc: 'default of the `integrations` flag: users may connect integrations (OAuth) and MCP servers may sign in with them ([integrations](areas/integrations.md))',
    }),
    openaiApi: variable('CAPABILITY_OPENAI_API', bool(), {
      default: 'true',
      doc: 'default of the `openaiApi` flag: the OpenAI-compatible API under `/v1` ([the OpenAI-compatible API](areas/openai-api.md))',
    }),
    mcpServer: variable('CAPABILITY_MCP_SERVER', bool(), {
      default: 'true',
      doc: 'default of the `mcpServer` flag: the workspace as an MCP server at `/mcp` ([the MCP server](areas/mcp-server.md))',
    }),
    billingProvider: variable('BILLING_PROVIDER', oneOf(['stripe']), {
      default: 'stripe',
      doc: 'payment provider while billing is on (reported as `none` while it is off)',
    }),
    cacheMs: variable('CAPABILITY_CACHE_MS', int(0, 60_000), {
      default: '2000',
      doc: 'how long an instance reuses the stored flags (and the model policy)',
    }),
  },
  billing: {
    currency: variable(
      'BILLING_CURRENCY',
      matching(/^[a-z]{3}$/, 'must be an ISO 4217 code in lower case, such as usd', 'ISO 4217 code, lower case'),
      {
        default: 'usd',
        doc: 'the currency of every amount',
      },
    ),
    /** What users without a paid plan (and every user while billing is off) are entitled to; null is unlimited. */
    defaultEntitlements: {
      monthlyBudgetCents: variable('ENTITLEMENT_MONTHLY_BUDGET_CENTS', int(0, Number.MAX_SAFE_INTEGER), {
        unset: null,
        defaultDoc: 'unlimited',
        doc: 'model usage included each month for the `self_hosted` and `free` plans',
      }),
      storageBytes: variable('ENTITLEMENT_STORAGE', size(), {
        unset: null,
        defaultDoc: 'unlimited',
        doc: "declared size of a user's files for those plans (`10gb`)",
      }),
      automations: variable('ENTITLEMENT_AUTOMATIONS', int(0, Number.MAX_SAFE_INTEGER), {
        unset: null,
        defaultDoc: 'unlimited',
        doc: 'automations a user may have on those plans',
      }),
    },
    plans: variable('BILLING_PLANS', plans, {
      unset: [],
      doc: 'paid plans as JSON: `{"pro":{"priceIds":["price_…"],"monthlyBudgetCents":2000,"storage":"10gb","automations":50}}` (an absent limit is unlimited)',
    }),
    stripe: {
      webhookSecret: variable(
        'STRIPE_WEBHOOK_SECRET',
        text().refine((secret) => secret.startsWith('whsec_'), 'must be the endpoint signing secret (whsec_…)'),
        { unset: null, accepts: '`whsec_…`', doc: "the endpoint's signing secret; `POST /webhooks/stripe` is served only with it" },
      ),
      toleranceSeconds: variable('STRIPE_WEBHOOK_TOLERANCE_SECONDS', int(10, 3600), {
        default: '300',
        doc: "how far a signature's timestamp may be from now",
      }),
    },
  },
});

export type { Entitlements, Plan };
