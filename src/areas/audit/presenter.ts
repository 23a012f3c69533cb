import type { Selectable } from 'kysely';
import type { components } from '../../../generated/api';
import type { AuditEvents } from '../../../generated/db';

type AuditEvent = components['schemas']['AuditEvent'];

export function presentAuditEvent(row: Selectable<AuditEvents>): AuditEvent {
  return {
    eventId: row.id,
    action: row.action,
    actorUserId: row.actor_user_id,
    resourceType: row.resource_type,
    resourceId: row.resource_id,
    outcome: row.outcome as AuditEvent['outcome'],
    createdAt: row.created_at.getTime(),
    requestId: row.request_id,
    metadata: (row.metadata ?? {}) as Record<string, unknown>,
  };
}

const CSV_COLUMNS = [
  'eventId',
  'createdAt',
  'action',
  'actorUserId',
  'resourceType',
  'resourceId',
  'outcome',
  'requestId',
  'metadata',
] as const;

/** A CSV field: quoted when needed, and never read as a formula by a spreadsheet. */
function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text = typeof value === 'string' ? value : typeof value === 'number' ? String(value) : JSON.stringify(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export const AUDIT_CSV_HEADER = `${CSV_COLUMNS.join(',')}\r\n`;

export function auditEventCsvLine(event: AuditEvent): string {
  return `${CSV_COLUMNS.map((column) => csvField(event[column])).join(',')}\r\n`;
}

export function auditEventJsonLine(event: AuditEvent): string {
  return `${JSON.stringify(event)}\n`;
}
