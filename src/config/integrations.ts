import { DEFAULT_ONBOARDING_STEPS } from '../areas/onboarding/service';
import { topic, variable } from './declare';
import { entry, int, list, matching, parsed, scaled, url } from './kinds';
import { parseIntegrationProviders } from './integration-providers';

/** The service's public base URL: http or https, without query, fragment or credentials; trailing slashes dropped. */
const baseUrl = url(['https:', 'http:'])
  .refine((value) => {
    const parsedUrl = new URL(value);
    return !(parsedUrl.search || parsedUrl.hash || parsedUrl.username || parsedUrl.password);
  }, 'must be a base URL such as https://api.example.com (no query, fragment or credentials)')
  .transform((value) => value.replace(/\/+$/, ''));

/** An https URL, or http outside production: the rule production-urls-are-https. */
const isHttp = (value: string | null) => value !== null && value.startsWith('http:');

/** Integrations: OAuth connections of users to operator-configured providers and to MCP servers (src/areas/integrations). */
export const integrations = topic(
  'Integrations',
  {
    integrations: {
      publicUrl: variable('PUBLIC_URL', baseUrl, {
        unset: null,
        accepts: 'https or http base URL',
        default: (ctx) => {
          if (ctx.env === 'production') return undefined;
          const port = ctx.raw('PORT');
          return `http://localhost:${port !== undefined && /^\d{1,5}$/.test(port) && Number(port) <= 65535 ? Number(port) : 8080}`;
        },
        defaultDoc: '`http://localhost:<PORT>` outside production',
        doc: "the service's public base URL, as browsers reach it; the OAuth redirect URI is `<PUBLIC_URL>/integrations/callback` (register it with each provider). Required in production with `INTEGRATIONS`; without it connecting is `409`",
      }),
      providers: variable('INTEGRATIONS', parsed('JSON object of id → provider', parseIntegrationProviders), {
        unset: [],
        doc: 'the OAuth 2.0 / OpenID Connect providers users may connect: a JSON object of id → `{ name, issuer }` (OpenID Connect discovery) or `{ name, authorizationUrl, tokenUrl, revocationUrl? }`, with `clientId`, optional `clientSecret` (without one: a public client, PKCE only), `scopes` and `authorizationParams` (such as `{"access_type":"offline"}`). Ids are lower-case words; URLs https (http outside production); checked at start ([integrations](areas/integrations.md))',
      }),
      stateTtlMs: variable('INTEGRATION_STATE_TTL_SECONDS', scaled(60, 3600, 1000), {
        default: '600',
        doc: 'how long an authorization URL can be completed, in seconds',
      }),
      returnUrl: variable('INTEGRATIONS_RETURN_URL', url(['https:', 'http:']), {
        unset: null,
        doc: 'a web-app page the callback sends the browser to (`303`) with `integration`, `status` (`connected`/`failed`) and `reason` in the query; unset, the callback answers a small page',
      }),
      timeoutMs: variable('INTEGRATION_TIMEOUT_MS', int(100, 120_000), {
        default: '15000',
        doc: 'how long one request to an authorization server may take (discovery, registration, token, refresh, revocation)',
      }),
    },
  },
  {
    'production-urls-are-https': {
      variables: ['NODE_ENV', 'PUBLIC_URL', 'INTEGRATIONS_RETURN_URL', 'INTEGRATIONS'],
      requires: 'PUBLIC_URL, INTEGRATIONS_RETURN_URL and the URLs of INTEGRATIONS must be https URLs in production',
      broken: ({ integrations: { publicUrl, returnUrl, providers } }, ctx) => {
        if (ctx.env !== 'production') return false;
        const problems: string[] = [];
        if (isHttp(publicUrl)) problems.push('PUBLIC_URL must be an https URL in production');
        if (isHttp(returnUrl)) problems.push('INTEGRATIONS_RETURN_URL must be an https URL in production');
        for (const provider of providers) {
          for (const field of ['issuer', 'authorizationUrl', 'tokenUrl', 'revocationUrl'] as const) {
            if (isHttp(provider[field])) problems.push(`INTEGRATIONS "${provider.id}": ${field} must be an https URL in production`);
          }
        }
        return problems;
      },
    },
    'production-integrations-need-public-url': {
      variables: ['NODE_ENV', 'INTEGRATIONS', 'PUBLIC_URL'],
      requires:
        'INTEGRATIONS needs PUBLIC_URL in production: the https base URL browsers reach the service at (the OAuth redirect URI is <PUBLIC_URL>/integrations/callback)',
      broken: ({ integrations: { publicUrl, providers } }, ctx) => ctx.env === 'production' && providers.length > 0 && publicUrl === null,
    },
  },
);

/** A semantic version of at most 64 characters. */
const SEMVER = /^(?=.{1,64}$)\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/;
const STEP_ID = /^[a-z][a-z0-9_]{0,39}$/;

/** The app shell: discovery and onboarding (src/areas/discovery, src/areas/onboarding). */
export const shell = topic('App shell', {
  shell: {
    minClientVersion: variable('MIN_CLIENT_VERSION', matching(SEMVER, 'must be a semantic version such as 2.3.0', 'semantic version'), {
      unset: null,
      doc: 'the oldest client version the deployment supports (`2.3.0`); `GET /api/v1/discovery` announces it (`null` when unset) so that older clients can ask their users to update',
    }),
    onboardingSteps: variable(
      'ONBOARDING_STEPS',
      list(entry(STEP_ID, 'entries are lower-case words of letters, digits and _'))
        .refine((steps) => new Set(steps).size === steps.length, 'lists a step twice')
        // A list of commas only stands for the default too.
        .transform((steps): string[] => (steps.length > 0 ? steps : [...DEFAULT_ONBOARDING_STEPS])),
      {
        default: DEFAULT_ONBOARDING_STEPS.join(','),
        accepts: 'comma-separated step ids (lower-case letters, digits and `_`)',
        doc: "the onboarding steps, in order. `first_project`, `first_file` and `model` are also done when the user's data shows them; other steps only when marked complete ([app shell](areas/app-shell.md#onboarding-get-apiv1onboarding-post-apiv1onboardingcomplete-post-apiv1onboardingreset))",
      },
    ),
  },
});
