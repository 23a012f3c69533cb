import { CronExpressionParser } from 'cron-parser';

/** Why a cron expression is not a five-field schedule (minute granularity), or null. */
export function cronProblem(expression: string): string | null {
  if (expression.trim().split(/\s+/).length !== 5) {
    return 'must have five fields: minute, hour, day of month, month and day of week (as in 0 9 * * 1-5)';
  }
  try {
    CronExpressionParser.parse(expression);
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

/** Why a time zone is not an IANA zone this runtime knows, or null. */
export function timezoneProblem(timezone: string): string | null {
  try {
    new Intl.DateTimeFormat('en', { timeZone: timezone });
    return null;
  } catch {
    return `"${timezone}" is not an IANA time zone (such as Europe/Paris or UTC)`;
  }
}

/** The next `count` slots of a valid schedule strictly after `after`. */
export function nextSlots(cron: string, timezone: string, after: Date, count: number): Date[] {
  const expression = CronExpressionParser.parse(cron, { tz: timezone, currentDate: after });
  return Array.from({ length: count }, () => expression.next().toDate());
}

/** The latest slot of a valid schedule at or before `now`. */
export function latestSlot(cron: string, timezone: string, now: Date): Date {
  return CronExpressionParser.parse(cron, { tz: timezone, currentDate: new Date(now.getTime() + 1) })
    .prev()
    .toDate();
}
