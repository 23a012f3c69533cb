import type { components } from '../../../generated/api';
import type { ShellState } from './service';

export function presentBootstrap(state: ShellState): components['schemas']['Bootstrap'] {
  const { settings, subscription } = state;
  return {
    user: { userId: state.userId, roles: state.roles },
    capabilities: state.capabilities,
    // The settings and onboarding parts as their own routes present them (areas meet through services only).
    settings: { ...settings, updatedAt: settings.updatedAt?.getTime() ?? null },
    models: {
      available: state.models.map((m) => ({ modelId: m.modelId, kinds: m.kinds })),
      defaults: {
        chat: settings.defaultChatModel,
        image: settings.defaultImageModel,
        transcription: settings.defaultTranscriptionModel,
        speech: settings.defaultSpeechModel,
      },
    },
    subscription: {
      plan: subscription.plan,
      status: subscription.status,
      provider: subscription.provider,
      periodEnd: subscription.periodEnd.getTime(),
      entitlements: subscription.entitlements,
      spentCents: subscription.spentCents,
      availableCents: subscription.availableCents,
    },
    onboarding: {
      steps: state.onboarding.steps.map((s) => ({ ...s, completedAt: s.completedAt?.getTime() ?? null })),
      completed: state.onboarding.completed,
    },
    limits: {
      maxUploadBytes: state.limits.maxUploadBytes,
      maxMessageChars: state.limits.maxMessageChars,
      maxUiSettingsBytes: state.limits.maxUiSettingsBytes,
      rateLimitPerMinute: state.limits.rateLimitPerMinute,
    },
  };
}
