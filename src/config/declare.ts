import type { Kind } from './kinds';

/**
 * The means of declaring the configuration once: each variable with its name, type, default and
 * description (`variable`), grouped by topic (`topic`) into the shape the service reads, with the
 * topic's cross-field rules by name. The loader (`load`), the `Config` type (`Infer`) and
 * docs/configuration.md (scripts/config-docs.ts) all come from these declarations.
 */

export type Env = Record<string, string | undefined>;
export type NodeEnv = 'development' | 'production' | 'test';

/** What a computed default or a rule may read besides the configuration. */
export interface Context {
  /** NODE_ENV as read (development when it is unset or not understood). */
  readonly env: NodeEnv;
  /** A variable as set: trimmed; undefined when unset or blank. */
  raw(name: string): string | undefined;
  /** The name a variable was read under: its deprecated alias when only that one is set. */
  nameRead(name: string): string;
}

interface Spec {
  doc: string;
  /** A deprecated name, read when the variable itself is unset (both set differently is a problem). */
  alias?: string;
  /** The accepted values as the docs show them; the type's description by default. */
  accepts?: string;
  /** The value when unset, as written in the environment; computed from other variables when a function. */
  default?: string | ((ctx: Context) => string | undefined);
  /** The docs' default column when it is not the static default. */
  defaultDoc?: string;
  /** The value when unset and no default applies. */
  unset?: unknown;
}

export class Variable<T> {
  declare readonly __value: T;
  constructor(
    readonly name: string,
    readonly kind: Kind<unknown>,
    readonly spec: Spec,
  ) {}

  get accepts(): string {
    return this.spec.accepts ?? this.kind.description ?? '';
  }

  /** The docs' default column. */
  get documentedDefault(): string {
    if (this.spec.defaultDoc !== undefined) return this.spec.defaultDoc;
    return typeof this.spec.default === 'string' ? `\`${this.spec.default}\`` : '—';
  }
}

interface Common {
  doc: string;
  alias?: string;
  accepts?: string;
}

/** A variable with a default, written as the environment would hold it. */
export function variable<T>(name: string, kind: Kind<T>, spec: Common & { default: string; defaultDoc?: string }): Variable<T>;
/** A variable whose default is computed from other variables, documented by `defaultDoc`. */
export function variable<T>(
  name: string,
  kind: Kind<T>,
  spec: Common & { default: (ctx: Context) => string; defaultDoc: string },
): Variable<T>;
/** A variable without a default (or with one that may not apply): `unset` when it is not set. */
export function variable<T>(
  name: string,
  kind: Kind<T>,
  spec: Common & { unset: NoInfer<T>; default?: (ctx: Context) => string | undefined; defaultDoc?: string },
): Variable<T>;
export function variable<T, U>(
  name: string,
  kind: Kind<T>,
  spec: Common & { unset: U; default?: (ctx: Context) => string | undefined; defaultDoc?: string },
): Variable<T | U>;
export function variable(name: string, kind: Kind<unknown>, spec: Spec): Variable<unknown> {
  return new Variable(name, kind, spec);
}

/** Settings present only when one variable is set (null otherwise; their variables are then not read). */
export class Section<T extends Tree> {
  declare readonly __section: T;
  constructor(
    readonly when: string,
    readonly tree: T,
  ) {}
}

export function presentWith<T extends Tree>(name: string, tree: T): Section<T> {
  return new Section(name, tree);
}

export interface Tree {
  [key: string]: Variable<unknown> | Section<Tree> | Tree;
}

export type Infer<N> =
  N extends Variable<infer T> ? T : N extends Section<infer S> ? Infer<S> | null : N extends Tree ? { [K in keyof N]: Infer<N[K]> } : never;

/** A cross-field rule: a requirement on several variables together. */
export interface Rule<C> {
  /** The variables it relates. */
  variables: readonly string[];
  /** What it requires, as its problem says. */
  requires: string;
  /** Whether the configuration breaks it: true, or the problems themselves when they name what is at fault. */
  broken(config: C, ctx: Context): boolean | string[];
}

/** Variables of one subject, in the shape of the configuration, and their cross-field rules by name. */
export interface Topic<T extends Tree> {
  title: string;
  tree: T;
  rules: Record<string, Rule<Infer<T>>>;
}

export function topic<T extends Tree>(title: string, tree: T, rules: Record<string, Rule<Infer<T>>> = {}): Topic<T> {
  return { title, tree, rules };
}

/** The variables of a tree, in declaration order. */
export function variablesOf(tree: Tree): Variable<unknown>[] {
  return Object.values(tree).flatMap((node) =>
    node instanceof Variable ? [node] : node instanceof Section ? variablesOf(node.tree) : variablesOf(node),
  );
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

class Reader implements Context {
  readonly problems: string[] = [];
  /** The variables set to a value they do not accept (by their declared name). */
  readonly failed = new Set<string>();
  env: NodeEnv = 'development';
  constructor(
    private readonly values: Env,
    private readonly aliases: Map<string, string>,
  ) {}

  raw(name: string): string | undefined {
    const value = this.values[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  }

  nameRead(name: string): string {
    const alias = this.aliases.get(name);
    return alias !== undefined && this.raw(name) === undefined && this.raw(alias) !== undefined ? alias : name;
  }

  /** The variable's value; on a problem, its default's (the rules still see a whole configuration). */
  read<T>(variable: Variable<T>, report = true): T {
    const { alias } = variable.spec;
    if (report && alias !== undefined) {
      const [value, old] = [this.raw(variable.name), this.raw(alias)];
      if (value !== undefined && old !== undefined && value !== old)
        this.problems.push(`set ${variable.name} only (${alias} is its deprecated alias, set to another value)`);
    }
    const name = this.nameRead(variable.name);
    const value = this.raw(name);
    if (value !== undefined) {
      const result = variable.kind.safeParse(value);
      if (result.success) return result.data as T;
      if (report) {
        this.failed.add(variable.name);
        this.problems.push(...result.error.issues.map((issue) => `${name} ${issue.message}`));
      }
    }
    const fallback = typeof variable.spec.default === 'function' ? variable.spec.default(this) : variable.spec.default;
    if (fallback === undefined) return variable.spec.unset as T;
    const result = variable.kind.safeParse(fallback);
    if (!result.success) throw new Error(`the default of ${variable.name} (${fallback}) is not one of its values`);
    return result.data as T;
  }

  tree(tree: Tree): Record<string, unknown> {
    return Object.fromEntries(
      Object.entries(tree).map(([key, node]) => [
        key,
        node instanceof Variable
          ? this.read(node)
          : node instanceof Section
            ? this.raw(node.when) === undefined
              ? null
              : this.tree(node.tree)
            : this.tree(node),
      ]),
    );
  }
}

/**
 * Reads every topic's variables from the environment, then checks every topic's rules (but those
 * relating a variable at fault); throws a ConfigError listing every problem (each naming its
 * variable, or its rule) when there is one. NODE_ENV is read first, for the computed defaults and
 * the rules.
 */
export function load(topics: readonly Topic<Tree>[], values: Env, nodeEnv: Variable<NodeEnv>): Record<string, unknown> {
  const aliases = new Map<string, string>();
  for (const topic of topics) for (const v of variablesOf(topic.tree)) if (v.spec.alias !== undefined) aliases.set(v.name, v.spec.alias);
  const reader = new Reader(values, aliases);
  reader.env = reader.read(nodeEnv, false);
  const config: Record<string, unknown> = {};
  for (const topic of topics) Object.assign(config, reader.tree(topic.tree));
  for (const topic of topics) {
    for (const [name, rule] of Object.entries(topic.rules)) {
      // A variable at fault is reported already: the rules it takes part in wait until it is fixed.
      if (rule.variables.some((variable) => reader.failed.has(variable))) continue;
      const broken = rule.broken(config as Infer<Tree>, reader);
      const problems = broken === true ? [rule.requires] : broken === false ? [] : broken;
      reader.problems.push(...problems.map((problem) => `${problem} [rule ${name}]`));
    }
  }
  if (reader.problems.length > 0) throw new ConfigError(reader.problems);
  return config;
}
