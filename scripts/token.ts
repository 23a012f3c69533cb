/**
 * `make token USER=<id>`: prints a development access token for USER, alone on the last line.
 * Only in development mode (no identity provider configured): production tokens come from the
 * identity provider.
 */
import { hasIdentityProvider, loadConfig } from '../src/config';
import { loadDevAuthMaterial, signDevToken } from '../src/platform/tokens';

async function main(): Promise<void> {
  const userId = (process.argv[2] ?? '').trim();
  if (!userId || userId.length > 200) {
    console.error('usage: make token USER=<user id>');
    process.exit(2);
  }
  const config = loadConfig();
  if (hasIdentityProvider(config)) {
    console.error('An identity provider is configured: get tokens from it, not from this script.');
    process.exit(1);
  }
  const hours = Number(process.env.TOKEN_TTL_HOURS ?? '12');
  const token = await signDevToken(await loadDevAuthMaterial(config.dataDir), userId, Math.round(hours * 3600));
  console.error(`Development token for "${userId}", valid ${hours} h (DATA_DIR=${config.dataDir}):`);
  console.log(token);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
