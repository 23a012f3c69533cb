import type { components } from '../../../generated/api';
import type { Discovery } from './service';

/** The session cookie's name and the web-app route that creates and ends it. */
const SESSION_COOKIE = 'service_session';
const SESSION_PATH = '/auth/session';

export function presentDiscovery(discovery: Discovery): components['schemas']['Discovery'] {
  const major = discovery.apiVersion.split('.')[0] ?? '1';
  return {
    apiVersion: discovery.apiVersion,
    supportedVersions: [{ version: `v${major}`, basePath: `/api/v${major}`, documentVersion: discovery.apiVersion, status: 'current' }],
    minClientVersion: discovery.minClientVersion,
    authentication: {
      schemes: [
        {
          name: 'bearerAuth',
          type: 'bearer',
          description:
            'An access token of the identity provider, or a personal access token of the service (`aiws_pat_…`, with scopes), in `Authorization: Bearer <token>`.',
        },
        {
          name: 'browserSession',
          type: 'cookie',
          description: 'The signed session cookie of the web app, created from a bearer token.',
          cookieName: SESSION_COOKIE,
          sessionPath: SESSION_PATH,
        },
      ],
      oidc: discovery.oidc,
    },
    capabilities: discovery.capabilities,
    links: {
      openapi: '/openapi.json',
      openapiYaml: '/openapi.yaml',
      docs: '/docs',
      ...(discovery.capabilities.openaiApi ? { openaiApi: '/v1' } : {}),
      ...(discovery.capabilities.mcpServer ? { mcpServer: '/mcp' } : {}),
    },
  };
}
