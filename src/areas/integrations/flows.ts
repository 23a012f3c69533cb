import type { Outbound } from '../../platform/net/outbound';
import type { IntegrationProvider } from './oauth';
import { ProviderFlow } from './provider-flow';
import { McpServerFlow } from './server-flow';

/**
 * The OAuth flows of the operator's providers (each caches its discovered configuration) and of
 * MCP servers, built once and shared by connecting and by using connections.
 */
export class OAuthFlows {
  /** MCP servers' own authorization servers, every request through the outbound guard. */
  readonly servers: McpServerFlow;
  private readonly providers: Map<string, ProviderFlow>;

  constructor(settings: { providers: IntegrationProvider[]; timeoutMs: number }, outbound: Outbound) {
    this.providers = new Map(settings.providers.map((provider) => [provider.id, new ProviderFlow(provider, settings.timeoutMs)]));
    this.servers = new McpServerFlow(outbound, settings.timeoutMs);
  }

  /** The flow of the configured provider with this id, or undefined. */
  provider(integrationId: string): ProviderFlow | undefined {
    return this.providers.get(integrationId);
  }
}
