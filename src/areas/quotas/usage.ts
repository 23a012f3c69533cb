import type { Schemas } from '../../platform/api-types';
import type { BillingService } from '../billing/service';
import { presentStanding } from './presenter';
import type { QuotaService } from './service';

const MICRO = 1_000_000;

/**
 * A user's own spending and limits (`GET /api/v1/usage`): their budget in its billing period, the
 * quotas that apply to them, and their own charged calls by model from the usage ledger.
 */
export class UsageService {
  constructor(
    private readonly billing: Pick<BillingService, 'spending' | 'spendByModel'>,
    private readonly quotas: Pick<QuotaService, 'standings'>,
  ) {}

  async of(userId: string): Promise<Schemas['OwnUsageResponse']['usage']> {
    const { standing, spending } = await this.billing.spending(userId);
    const [quotas, models] = await Promise.all([this.quotas.standings(userId), this.billing.spendByModel(userId, standing.period.start)]);
    return {
      budget: {
        balanceCents: spending.balanceCents,
        periodStart: standing.period.start.getTime(),
        periodEnd: standing.period.end.getTime(),
        spentCents: spending.spentMicro / MICRO,
        availableCents: spending.availableMicro === null ? null : Math.floor(spending.availableMicro / MICRO),
      },
      quotas: quotas.map(presentStanding),
      models: models.map((m) => ({
        model: m.model,
        calls: Number(m.calls),
        inputTokens: m.input_tokens,
        outputTokens: m.output_tokens,
        spentCents: m.cost / MICRO,
      })),
    };
  }
}
