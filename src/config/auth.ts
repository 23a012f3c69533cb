import { topic, variable } from './declare';
import { entry, int, list, scaled, text, url } from './kinds';

/** A list of commas only stands for the default too. */
const DEFAULT_ALGORITHMS = ['RS256', 'ES256'];
const ASYMMETRIC = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

function isOrigin(value: string): boolean {
  try {
    return new URL(value).origin === value;
  } catch {
    return false;
  }
}

/** Whether an identity provider signs the access tokens (without one, development signs its own). */
export function hasIdentityProvider(config: { auth: { jwksUrl: string | null; publicKeyPem: string | null } }): boolean {
  return config.auth.jwksUrl !== null || config.auth.publicKeyPem !== null;
}

/** Access tokens of the identity provider, and the session cookie. */
export const auth = topic(
  'Authentication',
  {
    auth: {
      jwksUrl: variable('AUTH_JWKS_URL', url(['https:', 'http:']), {
        unset: null,
        doc: 'JWKS of the identity provider (or `AUTH_PUBLIC_KEY`)',
      }),
      publicKeyPem: variable(
        'AUTH_PUBLIC_KEY',
        text().transform((pem) => pem.replace(/\\n/g, '\n')),
        { unset: null, accepts: 'PEM', doc: 'PEM public key (SPKI) of the identity provider, `\\n` escapes allowed' },
      ),
      issuer: variable('AUTH_ISSUER', text(), { unset: null, doc: 'required with an identity provider; checked on every token' }),
      audience: variable('AUTH_AUDIENCE', text(), { unset: null, doc: 'required with an identity provider; checked on every token' }),
      algorithms: variable(
        'AUTH_ALGORITHMS',
        list(
          entry(
            (alg) => ASYMMETRIC.includes(alg),
            (alg) => `may only list asymmetric algorithms (${ASYMMETRIC.join(', ')}); got "${alg}"`,
          ),
        ).transform((algorithms) => (algorithms.length > 0 ? algorithms : DEFAULT_ALGORITHMS)),
        {
          default: DEFAULT_ALGORITHMS.join(','),
          accepts: `comma-separated, of ${ASYMMETRIC.map((alg) => `\`${alg}\``).join(', ')}`,
          doc: 'accepted JWT algorithms (asymmetric only)',
        },
      ),
      groupsClaim: variable('AUTH_GROUPS_CLAIM', text({ min: 1 }), {
        unset: null,
        doc: "claim of a verified token (an array of group names, or one name) that fills the user's `identity_provider` group memberships: groups are made by name when missing, memberships added and removed to match it (an absent claim: none), manual memberships untouched; matched when a token is first verified and its claim changed",
      }),
      cookieSecret: variable('COOKIE_SECRET', text({ min: 32 }), {
        unset: null,
        defaultDoc: 'generated in development',
        doc: 'secret that signs the session cookie',
      }),
      sessionIdleMs: variable('SESSION_IDLE_MINUTES', scaled(1, 60 * 24 * 30, 60_000), {
        default: '720',
        doc: 'a session ends after this many minutes without use',
      }),
      sessionAbsoluteMs: variable('SESSION_ABSOLUTE_HOURS', scaled(1, 24 * 365, 3_600_000), {
        default: '168',
        doc: 'a session ends this many hours after creation',
      }),
      allowedOrigins: variable(
        'ALLOWED_ORIGINS',
        list(entry(isOrigin, 'entries must be origins such as https://app.example.com'), 'comma-separated origins'),
        {
          unset: [],
          doc: "origins (`https://app.example.com`) allowed for cookie-authenticated unsafe requests, besides the service's own",
        },
      ),
    },
    accessTokens: {
      defaultTtlDays: variable('ACCESS_TOKEN_DEFAULT_TTL_DAYS', int(1, 3650), {
        default: '30',
        doc: 'a personal access token created without `expiresAt` expires this many days later',
      }),
      maxTtlDays: variable('ACCESS_TOKEN_MAX_TTL_DAYS', int(1, 3650), {
        default: '365',
        doc: 'the latest expiry a personal access token may be given, in days from its creation',
      }),
      maxPerUser: variable('ACCESS_TOKEN_MAX_PER_USER', int(1, 10_000), {
        default: '50',
        doc: 'live (not revoked, not expired) personal access tokens a user may hold',
      }),
      perMinute: variable('ACCESS_TOKEN_RATE_LIMIT_PER_MINUTE', int(0, 1_000_000), {
        default: '300',
        doc: "requests per personal access token and minute, across instances, within its user's `RATE_LIMIT_PER_MINUTE` (`429` above); `0` turns it off",
      }),
    },
    authFailuresPerMinute: variable('AUTH_FAILURES_PER_MINUTE', int(0, 1_000_000), {
      default: '30',
      doc: 'refused credentials per client address (`req.ip`, honouring `TRUST_PROXY`) and minute before `429 rate_limited`, across instances; requests that authenticate are never refused; 0 turns it off',
    }),
  },
  {
    'one-identity-provider': {
      variables: ['AUTH_JWKS_URL', 'AUTH_PUBLIC_KEY'],
      requires: 'set either AUTH_JWKS_URL or AUTH_PUBLIC_KEY, not both',
      broken: ({ auth }) => !!auth.jwksUrl && !!auth.publicKeyPem,
    },
    'access-token-default-within-max': {
      variables: ['ACCESS_TOKEN_DEFAULT_TTL_DAYS', 'ACCESS_TOKEN_MAX_TTL_DAYS'],
      requires: 'ACCESS_TOKEN_DEFAULT_TTL_DAYS must be at most ACCESS_TOKEN_MAX_TTL_DAYS',
      broken: ({ accessTokens }) => accessTokens.defaultTtlDays > accessTokens.maxTtlDays,
    },
    'identity-provider-needs-issuer-and-audience': {
      variables: ['AUTH_JWKS_URL', 'AUTH_PUBLIC_KEY', 'AUTH_ISSUER', 'AUTH_AUDIENCE'],
      requires: 'AUTH_ISSUER and AUTH_AUDIENCE are required with AUTH_JWKS_URL or AUTH_PUBLIC_KEY',
      broken: (config) => hasIdentityProvider(config) && (!config.auth.issuer || !config.auth.audience),
    },
    'production-needs-an-identity-provider': {
      variables: ['NODE_ENV', 'AUTH_JWKS_URL', 'AUTH_PUBLIC_KEY'],
      requires: 'production needs an identity provider: set AUTH_JWKS_URL or AUTH_PUBLIC_KEY, with AUTH_ISSUER and AUTH_AUDIENCE',
      broken: (config, ctx) => ctx.env === 'production' && !hasIdentityProvider(config),
    },
    'production-needs-a-cookie-secret': {
      variables: ['NODE_ENV', 'COOKIE_SECRET'],
      requires: 'production needs COOKIE_SECRET (at least 32 characters)',
      broken: ({ auth }, ctx) => ctx.env === 'production' && !auth.cookieSecret,
    },
  },
);
