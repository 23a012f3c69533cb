import type { components } from '../../../generated/api';
import type { UserSettings } from './service';

export function presentSettings(settings: UserSettings): components['schemas']['Settings'] {
  return { ...settings, updatedAt: settings.updatedAt?.getTime() ?? null };
}
