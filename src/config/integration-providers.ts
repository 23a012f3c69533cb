import type { IntegrationProvider } from '../areas/integrations/service';

const INTEGRATION_ID = /^[a-z][a-z0-9_-]{0,39}$/;
const INTEGRATION_EXAMPLE =
  '{"github":{"name":"GitHub","authorizationUrl":"https://github.com/login/oauth/authorize","tokenUrl":"https://github.com/login/oauth/access_token","clientId":"…","clientSecret":"…","scopes":["repo"]}}';

/**
 * INTEGRATIONS: a JSON object of integration id → provider: `name`, either `issuer` (an OpenID
 * Connect issuer, whose endpoints are discovered) or `authorizationUrl` and `tokenUrl` (and
 * optionally `revocationUrl`), `clientId`, optionally `clientSecret` (without one the client is
 * public: PKCE only), `scopes` and `authorizationParams` (extra parameters of the authorization
 * request, such as `{"access_type":"offline"}`). URLs are https or http (production allows https
 * only: the rule production-urls-are-https). `problem` is given each problem after the name.
 */
export function parseIntegrationProviders(raw: string, problem: (message: string) => void): IntegrationProvider[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    // The parser's message is not shown: it may quote the value, client secrets included.
    problem(`is not valid JSON; it must be a JSON object of integration ids, such as ${INTEGRATION_EXAMPLE}`);
    return [];
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    problem(`must be a JSON object of integration ids, such as ${INTEGRATION_EXAMPLE}`);
    return [];
  }
  const providers: IntegrationProvider[] = [];
  for (const [id, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (!INTEGRATION_ID.test(id)) problem(`ids are 1 to 40 lower-case letters, digits, _ or -, starting with a letter (got "${id}")`);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      problem(`"${id}" must be an object with name, clientId and either issuer or authorizationUrl and tokenUrl`);
      continue;
    }
    const entry = value as Record<string, unknown>;
    const known = [
      'name',
      'issuer',
      'authorizationUrl',
      'tokenUrl',
      'revocationUrl',
      'clientId',
      'clientSecret',
      'scopes',
      'authorizationParams',
    ];
    for (const field of Object.keys(entry))
      if (!known.includes(field)) problem(`"${id}" has an unknown field "${field}" (known: ${known.join(', ')})`);
    const text = (field: string, required: boolean): string | null => {
      const v = entry[field];
      if (v === undefined || v === null) {
        if (required) problem(`"${id}" needs ${field}`);
        return null;
      }
      if (typeof v !== 'string' || v.trim() === '') {
        problem(`"${id}": ${field} must be a non-empty string`);
        return null;
      }
      return v.trim();
    };
    const url = (field: string): string | null => {
      const v = text(field, false);
      if (v === null) return null;
      try {
        const parsedUrl = new URL(v);
        if (!['https:', 'http:'].includes(parsedUrl.protocol)) throw new Error('protocol');
        if (parsedUrl.hash) throw new Error('fragment');
      } catch {
        problem(`"${id}": ${field} must be an https (or, outside production, http) URL without a fragment`);
        return null;
      }
      return v;
    };
    const name = text('name', true);
    if (name !== null && name.length > 100) problem(`"${id}": name must be at most 100 characters`);
    const issuer = url('issuer');
    const authorizationUrl = url('authorizationUrl');
    const tokenUrl = url('tokenUrl');
    const revocationUrl = url('revocationUrl');
    if (issuer !== null && (authorizationUrl !== null || tokenUrl !== null))
      problem(`"${id}": give either issuer (discovery) or authorizationUrl and tokenUrl, not both`);
    if (entry.issuer === undefined && (entry.authorizationUrl === undefined || entry.tokenUrl === undefined))
      problem(`"${id}" needs issuer, or authorizationUrl and tokenUrl`);
    const clientId = text('clientId', true);
    const clientSecret = text('clientSecret', false);
    const scopes = entry.scopes ?? [];
    if (!Array.isArray(scopes) || !scopes.every((s) => typeof s === 'string' && /^[\x21\x23-\x5b\x5d-\x7e]+$/.test(s))) {
      problem(`"${id}": scopes must be a list of scope names (printable characters, no spaces or quotes)`);
    }
    const params = entry.authorizationParams ?? {};
    const reserved = ['response_type', 'client_id', 'redirect_uri', 'scope', 'state', 'code_challenge', 'code_challenge_method'];
    if (
      typeof params !== 'object' ||
      params === null ||
      Array.isArray(params) ||
      !Object.values(params).every((v) => typeof v === 'string')
    ) {
      problem(`"${id}": authorizationParams must be an object of strings, such as {"access_type":"offline","prompt":"consent"}`);
    } else {
      for (const key of Object.keys(params))
        if (reserved.includes(key)) problem(`"${id}": authorizationParams cannot set ${key} (the service sets it)`);
    }
    providers.push({
      id,
      name: name ?? id,
      issuer,
      authorizationUrl,
      tokenUrl,
      revocationUrl,
      clientId: clientId ?? '',
      clientSecret,
      scopes: Array.isArray(scopes) ? scopes.map(String) : [],
      authorizationParams:
        typeof params === 'object' && params !== null && !Array.isArray(params) ? (params as Record<string, string>) : {},
    });
  }
  return providers;
}
