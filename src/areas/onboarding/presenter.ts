import type { components } from '../../../generated/api';
import type { OnboardingState } from './service';

export function presentOnboarding(state: OnboardingState): components['schemas']['Onboarding'] {
  return {
    steps: state.steps.map((s) => ({ ...s, completedAt: s.completedAt?.getTime() ?? null })),
    completed: state.completed,
  };
}
