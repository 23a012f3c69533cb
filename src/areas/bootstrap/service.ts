import type { BillingService, BillingSummary } from '../billing/service';
import type { Capabilities, CapabilityService } from '../capabilities/service';
import type { OnboardingService, OnboardingState } from '../onboarding/service';
import type { PrincipalService, Role } from '../principals/service';
import { MAX_UI_BYTES, type ModelCatalog, type SettingsService, type UserSettings } from '../settings/service';

/** The deployment's limits a client respects before it sends (the entry passes the configuration's). */
export interface ShellLimits {
  maxUploadBytes: number;
  maxMessageChars: number;
  /** Requests per user and minute; null when not limited. */
  rateLimitPerMinute: number | null;
}

export interface BootstrapDeps {
  principals: Pick<PrincipalService, 'roles'>;
  capabilities: Pick<CapabilityService, 'current'>;
  settings: Pick<SettingsService, 'get'>;
  catalog: ModelCatalog;
  billing: Pick<BillingService, 'summary'>;
  onboarding: Pick<OnboardingService, 'state'>;
  limits: ShellLimits;
}

export interface ShellState {
  userId: string;
  roles: Role[];
  capabilities: Capabilities;
  settings: UserSettings;
  models: Array<{ modelId: string; kinds: string[] }>;
  subscription: BillingSummary;
  onboarding: OnboardingState;
  limits: ShellLimits & { maxUiSettingsBytes: number };
}

/** Everything a client's shell shows, read at once from the areas that own each part. */
export class BootstrapService {
  constructor(private readonly deps: BootstrapDeps) {}

  async load(userId: string): Promise<ShellState> {
    const { principals, capabilities, settings, catalog, billing, onboarding, limits } = this.deps;
    const [roles, caps, userSettings, models, subscription, steps] = await Promise.all([
      principals.roles(userId),
      capabilities.current(),
      settings.get(userId),
      catalog.available(userId),
      billing.summary(userId),
      onboarding.state(userId),
    ]);
    return {
      userId,
      roles,
      capabilities: caps,
      settings: userSettings,
      models,
      subscription,
      onboarding: steps,
      limits: { ...limits, maxUiSettingsBytes: MAX_UI_BYTES },
    };
  }
}
