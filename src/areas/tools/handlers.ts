import type { HandlerMap } from '../../http/handler';
import { presentTool, presentUnavailable } from './presenter';
import type { ToolService } from './service';

export function toolHandlers(tools: ToolService): Pick<HandlerMap, 'getTools'> {
  return {
    getTools: async ({ caller }) => {
      const { tools: list, unavailable } = await tools.list(caller.userId);
      return { tools: list.map(presentTool), unavailable: unavailable.map(presentUnavailable) };
    },
  };
}
