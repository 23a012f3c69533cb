import { parseSecretKeys } from '../platform/secrets';
import { topic, variable } from './declare';
import { bool, entry, list, parsed, text } from './kinds';

/** Secrets at rest (src/platform/secrets.ts), and the guard of every call to a URL a user chose (src/platform/net/outbound.ts). */
export const secrets = topic(
  'Secrets at rest and outbound calls',
  {
    secrets: {
      keys: variable(
        'SECRETS_KEY',
        // The problems of parseSecretKeys name SECRETS_KEY already, and never repeat a key.
        parsed('`<key id>:<base64 key>`, comma-separated', (value, problem) => {
          const result = parseSecretKeys(value);
          for (const message of result.problems) problem(message.replace(/^SECRETS_KEY /, ''));
          return result.keys;
        }),
        {
          unset: [],
          defaultDoc: 'generated in development (`DATA_DIR/dev-secrets/`)',
          doc: 'comma-separated `<key id>:<base64 of 32 random bytes>` (`k2026:$(openssl rand -base64 32)`): the first encrypts every stored secret (AES-256-GCM, bound to its record), every listed one decrypts. Required in production, the same on every instance',
        },
      ),
      webhookSecretsKey: variable('WEBHOOK_SECRETS_KEY', text({ min: 32 }), {
        unset: null,
        doc: 'deprecated: without `SECRETS_KEY` a key derived from it encrypts (key id `legacy`); with it, it only decrypts (also the webhook secrets of earlier versions)',
      }),
    },
    outbound: {
      allowLoopback: variable('OUTBOUND_ALLOW_LOOPBACK', bool(), {
        default: 'false',
        alias: 'WEBHOOK_ALLOW_LOOPBACK',
        doc: "let every user-chosen URL (webhooks, users' model provider connections, MCP servers, OAuth endpoints) reach loopback addresses on any port: tests and local development only, refused in production",
      }),
      allowedPorts: variable(
        'OUTBOUND_ALLOWED_PORTS',
        list(
          entry((port) => /^\d+$/.test(port) && Number(port) >= 1 && Number(port) <= 65535, 'must list port numbers').transform(Number),
          'comma-separated ports',
        ),
        { unset: [], alias: 'WEBHOOK_ALLOWED_PORTS', doc: 'ports user-chosen URLs may use besides 80 and 443' },
      ),
    },
  },
  {
    // Always required in production, not only once a secret is stored: a missing key then shows at
    // deploy time rather than at the first restart after a user saved a webhook or an API key.
    'production-needs-secrets-key': {
      variables: ['NODE_ENV', 'SECRETS_KEY', 'WEBHOOK_SECRETS_KEY'],
      requires:
        'production needs SECRETS_KEY to seal stored secrets: <key id>:<32 random bytes in base64>, e.g. k1:<output of openssl rand -base64 32>',
      broken: (_config, ctx) =>
        ctx.env === 'production' && ctx.raw('SECRETS_KEY') === undefined && ctx.raw('WEBHOOK_SECRETS_KEY') === undefined,
    },
    'no-loopback-in-production': {
      variables: ['NODE_ENV', 'OUTBOUND_ALLOW_LOOPBACK'],
      requires: 'OUTBOUND_ALLOW_LOOPBACK is for tests and local development; it cannot be set in production',
      broken: ({ outbound }, ctx) =>
        ctx.env === 'production' && outbound.allowLoopback
          ? [`${ctx.nameRead('OUTBOUND_ALLOW_LOOPBACK')} is for tests and local development; it cannot be set in production`]
          : false,
    },
  },
);
