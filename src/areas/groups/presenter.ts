import type { Schemas } from '../../platform/api-types';
import { millis } from '../../platform/db/timestamps';
import type { GroupView, MembershipView, MemberView } from './repository';

export function presentGroup(row: GroupView): Schemas['Group'] {
  return {
    groupId: row.id,
    name: row.name,
    description: row.description,
    source: row.source as Schemas['GroupSource'],
    memberCount: row.member_count,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}

export function presentMember(row: MemberView): Schemas['GroupMember'] {
  return { userId: row.user_id, source: row.source as Schemas['GroupSource'], addedAt: millis(row.created_at) };
}

export function presentMembership(row: MembershipView): Schemas['MyGroup'] {
  return {
    groupId: row.group_id,
    name: row.name,
    description: row.description,
    source: row.source as Schemas['GroupSource'],
    joinedAt: millis(row.created_at),
  };
}
