import type { HandlerMap } from '../../http/handler';
import { presentSettings } from './presenter';
import type { SettingsService } from './service';

export function settingsHandlers(settings: SettingsService): Pick<HandlerMap, 'getSettings' | 'updateSettings'> {
  return {
    getSettings: async ({ caller }) => ({ settings: presentSettings(await settings.get(caller.userId)) }),
    updateSettings: async ({ caller, body }) => ({ settings: presentSettings(await settings.update(caller.userId, body)) }),
  };
}
