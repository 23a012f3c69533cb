import type { Capabilities, CapabilityService } from '../capabilities/service';

/** What the deployment says about itself publicly (the entry passes the configuration's values). */
export interface DiscoverySettings {
  /** The version of the document served (`info.version`). */
  apiVersion: string;
  /** The oldest client version supported (MIN_CLIENT_VERSION), or null. */
  minClientVersion: string | null;
  /** The identity provider's issuer when it is an OpenID Connect issuer URL, else null. */
  oidcIssuer: string | null;
}

export interface Discovery {
  apiVersion: string;
  minClientVersion: string | null;
  oidc: { issuer: string; metadataUrl: string } | null;
  capabilities: Capabilities;
}

/** The public description of the deployment: the same for everyone, naming nothing private. */
export class DiscoveryService {
  constructor(private readonly deps: { capabilities: Pick<CapabilityService, 'current'>; settings: DiscoverySettings }) {}

  async describe(): Promise<Discovery> {
    const { apiVersion, minClientVersion, oidcIssuer } = this.deps.settings;
    return {
      apiVersion,
      minClientVersion,
      oidc:
        oidcIssuer === null
          ? null
          : { issuer: oidcIssuer, metadataUrl: `${oidcIssuer.replace(/\/+$/, '')}/.well-known/openid-configuration` },
      capabilities: await this.deps.capabilities.current(),
    };
  }
}
