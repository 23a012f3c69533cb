import type { HelmetOptions } from 'helmet';

/**
 * The headers of the API's answers (JSON, files, events): those that still mean something for a
 * response that is not a page, as the OWASP REST guidance lists them. A content policy that allows
 * nothing and no framing; no headers that only browsers' handling of documents reads (COOP,
 * Origin-Agent-Cluster, DNS prefetch), nor those of retired browsers and plug-ins
 * (X-XSS-Protection, X-Download-Options, X-Permitted-Cross-Domain-Policies).
 */
export const API_HEADERS: Readonly<HelmetOptions> = {
  contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
  crossOriginEmbedderPolicy: false,
  crossOriginOpenerPolicy: false,
  originAgentCluster: false,
  xDnsPrefetchControl: false,
  xDownloadOptions: false,
  xFrameOptions: { action: 'deny' },
  xPermittedCrossDomainPolicies: false,
  xXssProtection: false,
};

/** The headers of the reference page and its assets (`/docs`): helmet's defaults for documents. */
export const DOCUMENT_HEADERS: Readonly<HelmetOptions> = { crossOriginEmbedderPolicy: false };
