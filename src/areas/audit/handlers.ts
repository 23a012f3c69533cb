import type { Response } from 'express';
import { type HandlerMap, STREAMED } from '../../http/handler';
import { DEFAULT_LIMIT } from '../../platform/pagination';
import { AUDIT_CSV_HEADER, auditEventCsvLine, auditEventJsonLine, presentAuditEvent } from './presenter';
import type { AuditService } from './service';

/** Resolves when the response can take more data, or the client has gone. */
function drained(res: Response): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

export const AUDIT_EXPORT_ACTION = 'administration.audit.export';

export function auditHandlers(audit: AuditService): Pick<HandlerMap, 'listAuditEvents' | 'exportAuditEvents'> {
  return {
    listAuditEvents: async ({ query }) => {
      const filter = { action: query.action, actorUserId: query.actorUserId, resourceType: query.resourceType };
      const page = await audit.list(filter, { limit: query.limit ?? DEFAULT_LIMIT, before: query.before ?? null });
      return { events: page.events.map(presentAuditEvent), nextBefore: page.nextBefore };
    },
    exportAuditEvents: async ({ actor, query, res }) => {
      const filter = { action: query.action, actorUserId: query.actorUserId, resourceType: query.resourceType };
      const csv = query.format === 'csv';
      await audit.record(actor, {
        action: AUDIT_EXPORT_ACTION,
        resourceType: 'audit_log',
        outcome: 'success',
        metadata: { filter, format: csv ? 'csv' : 'ndjson' },
      });
      const stamp = new Date().toISOString().replace(/[:.]/g, '-');
      res.status(200);
      res.type(csv ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8');
      res.setHeader('Content-Disposition', `attachment; filename="audit-${stamp}.${csv ? 'csv' : 'ndjson'}"`);
      if (csv) res.write(AUDIT_CSV_HEADER);
      const line = csv ? auditEventCsvLine : auditEventJsonLine;
      for await (const batch of audit.exportBatches(filter)) {
        if (res.destroyed) return STREAMED; // the client went away
        const chunk = batch.map((row) => line(presentAuditEvent(row))).join('');
        if (!res.write(chunk)) await drained(res);
      }
      res.end();
      return STREAMED;
    },
  };
}
