/** What the services take that is read off the API document or the configuration. */
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { type Config, hasIdentityProvider } from '../config';

/** The longest chat message, as the document's message schema allows it. */
export function messageMaxLength(doc: OpenAPIV3.DocumentV3): number {
  const schema = doc.components?.schemas?.MessageCreateRequest as OpenAPIV3.SchemaObject | undefined;
  const content = schema?.properties?.content as OpenAPIV3.SchemaObject | undefined;
  if (content?.maxLength === undefined) throw new Error("the document gives no maxLength for a message's content");
  return content.maxLength;
}

/** The identity provider's issuer when it is an OpenID Connect issuer URL (https; http outside production), else null. */
export function oidcIssuer(config: Config): string | null {
  const issuer = config.auth.issuer;
  if (!hasIdentityProvider(config) || issuer === null) return null;
  try {
    const { protocol } = new URL(issuer);
    return protocol === 'https:' || (protocol === 'http:' && config.env !== 'production') ? issuer : null;
  } catch {
    return null;
  }
}

/** The model id the deployment's embedder is called by on /v1 (the built-in one: `builtin-hashing`). */
export function deploymentEmbedderId(config: Config): string {
  return config.embeddings.provider === 'http' ? config.embeddings.model : 'builtin-hashing';
}
