import type { components } from '../../../generated/api';
import { millis, millisOrNull } from '../../platform/db/timestamps';
import { OAUTH_TOKEN_PREFIX, TOKEN_PREFIX } from './service';
import type { AccessTokenRow, AccessTokenView } from './repository';

type AccessToken = components['schemas']['AccessToken'];

/** A token as clients see it (never its hash); `withUser` adds its user (the administrators' view). */
export function presentAccessToken(row: AccessTokenView | AccessTokenRow, now: number, withUser = false): AccessToken {
  const revokedAt = millisOrNull(row.revoked_at);
  const expiresAt = millis(row.expires_at);
  return {
    tokenId: row.id,
    ...(withUser ? { userId: row.owner_user_id } : {}),
    name: row.name,
    scopes: row.scopes as AccessToken['scopes'],
    prefix: `${row.client_id ? OAUTH_TOKEN_PREFIX : TOKEN_PREFIX}${row.lookup}`,
    ...(row.client_id ? { clientId: row.client_id } : {}),
    status: revokedAt !== null ? 'revoked' : expiresAt <= now ? 'expired' : 'active',
    createdAt: millis(row.created_at),
    expiresAt,
    lastUsedAt: millisOrNull(row.last_used_at),
    revokedAt,
  };
}
