import type { HandlerMap } from '../../http/handler';
import { presentOnboarding } from './presenter';
import type { OnboardingService } from './service';

export function onboardingHandlers(
  onboarding: OnboardingService,
): Pick<HandlerMap, 'getOnboarding' | 'completeOnboarding' | 'resetOnboarding'> {
  return {
    getOnboarding: async ({ caller }) => ({ onboarding: presentOnboarding(await onboarding.state(caller.userId)) }),
    completeOnboarding: async ({ caller, body }) => ({ onboarding: presentOnboarding(await onboarding.complete(caller.userId, body)) }),
    resetOnboarding: async ({ caller, body }) => ({ onboarding: presentOnboarding(await onboarding.reset(caller.userId, body?.step)) }),
  };
}
