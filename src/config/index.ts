/**
 * The configuration of the service, read from the environment once at start-up and validated.
 * Each variable is declared once, by topic, in this folder (name, type, default, description, and
 * the cross-field rules it takes part in, by name); `Config`, `loadConfig` and
 * docs/configuration.md (`make config-docs`) all come from those declarations.
 */
import { auth } from './auth';
import { automations } from './automations';
import { billing } from './billing';
import { type Env, type Infer, load, type Topic, type Tree } from './declare';
import { integrations, shell } from './integrations';
import { models } from './models';
import { secrets } from './secrets';
import { http, service } from './service';
import { knowledge, storage } from './storage';
import { tools } from './tools';

/** Every topic, in the order of docs/configuration.md; the rules are checked in this order too. */
const declared = [service, http, secrets, models, tools, auth, billing, storage, knowledge, automations, integrations, shell] as const;
export const topics: readonly Topic<Tree>[] = declared;

type Intersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;
/** Every topic's tree at once: their keys are distinct (the declarations' test). */
type Declaration = Intersection<(typeof declared)[number]['tree']>;

/** Configuration of the service, in the shape of the declarations. */
export type Config = Infer<Declaration>;

/** Reads and checks the configuration; throws a ConfigError naming every variable (or rule) at fault. */
export function loadConfig(env: Env = process.env): Config {
  return load(topics, env, service.tree.env) as Config;
}

export { hasIdentityProvider } from './auth';
export type { Entitlements, Plan } from './billing';
export { ConfigError, type Env } from './declare';
export { parseDuration } from './kinds';
