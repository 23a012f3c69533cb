import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentAutomation, presentRun, presentTestResult } from './presenter';
import type { AutomationRunner } from './runner';
import type { AutomationService } from './service';

export function automationHandlers(
  automations: AutomationService,
  runner: AutomationRunner,
): Pick<
  HandlerMap,
  'getAutomations' | 'createAutomation' | 'updateAutomation' | 'deleteAutomation' | 'testAutomation' | 'runAutomation' | 'getAutomationRuns'
> {
  return {
    getAutomations: async ({ caller, query }) => {
      if (query.automationId !== undefined)
        return { automation: presentAutomation(await automations.get(caller.userId, query.automationId)) };
      const page = await automations.list(caller.userId, { enabled: query.enabled }, readPage(query));
      return { automations: page.items.map(presentAutomation), nextCursor: page.nextCursor };
    },
    createAutomation: async ({ caller, body }) => ({ automation: presentAutomation(await automations.create(caller.userId, body)) }),
    updateAutomation: async ({ caller, body }) => ({ automation: presentAutomation(await automations.update(caller.userId, body)) }),
    deleteAutomation: async ({ caller, query, body }) => {
      const automationId = idFromQueryOrBody('automationId', query, body);
      await automations.delete(caller.userId, automationId);
      return { automationId, deleted: true };
    },
    testAutomation: async ({ caller, body }) => presentTestResult(await automations.test(caller.userId, body)),
    runAutomation: async ({ caller, body }) => {
      const queued = await automations.queueRun(caller.userId, body.automationId);
      runner.wake(); // start it now rather than at the next poll
      return { run: presentRun(queued.run, queued.outputs) };
    },
    getAutomationRuns: async ({ caller, query }) => {
      if (query.runId !== undefined) {
        const found = await automations.getRun(caller.userId, query.runId);
        return { run: presentRun(found.run, found.outputs) };
      }
      const page = await automations.listRuns(caller.userId, { automationId: query.automationId, status: query.status }, readPage(query));
      return { runs: page.items.map(({ run, outputs }) => presentRun(run, outputs)), nextCursor: page.nextCursor };
    },
  };
}
