import { Injectable, Optional } from '@nestjs/common';
import { AuditService } from '../audit/audit.service';
import { Principal } from '../common/principal';
import { DomainError } from '../common/errors';
import { MetricsService } from '../metrics/metrics.service';
import { Action, Resource } from './actions';
import { CompiledRule, compileRule, Decision, decide, decideUnitWide, Rule } from './policy';
import { RbacCache } from './rbac-cache';
import { RbacRepository } from './rbac.repository';

/** Actions that, before `POST /v1/rbac/init`, only the break-glass `bootstrap-admin` may take. */
export const ADMIN_ONLY: ReadonlySet<Action> = new Set<Action>([
  'unit.purge',
  'unit.force-unlock',
  'rbac.manage',
  'token.manage',
  'audit.read',
]);

export interface Explained {
  allowed: boolean;
  /** Why: the break-glass admin, the pre-init default, a rule, or no matching rule. */
  reason: 'bootstrap' | 'not-initialised' | 'rule' | 'no-matching-rule';
  rule?: Rule;
}

/**
 * A principal's rules read once, deciding synchronously afterwards: inside a transaction, where
 * the embedded database's one connection is taken and the rules cannot be read.
 */
export interface Decider {
  explain(action: Action, resource: Resource): Explained;
  /** Deleting, undeleting or purging a whole unit with these workspaces (`decideUnitWide`). */
  explainUnitWide(
    action: Action,
    unit: string,
    workspaces: readonly string[],
  ): Explained & { workspace?: string };
}

/** Who a decision is about (a principal, or a hypothetical one for `POST /v1/rbac/test`). */
export interface Subject {
  subject: string;
  kind?: Principal['kind'];
  email?: string;
  groups?: readonly string[];
}

/**
 * The one place that decides whether a principal may take an action on a resource; every door
 * and service calls it. Fails closed: when the rules cannot be read the error propagates (a 503
 * to the caller), never an allow.
 */
@Injectable()
export class AuthorizationService {
  constructor(
    private readonly repo: RbacRepository,
    private readonly cache: RbacCache,
    private readonly audit: AuditService,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  async can(principal: Subject, action: Action, resource: Resource): Promise<boolean> {
    return (await this.explain(principal, action, resource)).allowed;
  }

  /** Throws `forbidden` naming the action and resource when the answer is no (audited). */
  async authorize(principal: Principal, action: Action, resource: Resource): Promise<void> {
    const decision = await this.explain(principal, action, resource);
    if (!decision.allowed) throw this.refusal(principal, action, resource, decision);
    this.metrics?.authzDecided(true);
  }

  /**
   * Throws `forbidden` unless `decider` allows the unit-wide action on `unit` with these
   * workspaces (audited). The refusal names the workspace whose deny decided only when the
   * caller may read that workspace.
   */
  authorizeUnitWide(
    principal: Principal,
    decider: Decider,
    action: Action,
    unit: string,
    workspaces: readonly string[],
  ): void {
    const decision = decider.explainUnitWide(action, unit, workspaces);
    if (decision.allowed) {
      this.metrics?.authzDecided(true);
      return;
    }
    const workspace = decision.workspace;
    if (workspace === undefined) throw this.refusal(principal, action, { unit }, decision);
    const named = decider.explain('unit.read', { unit, workspace }).allowed;
    const where = named ? `its workspace ${workspace}` : 'one of its workspaces';
    throw this.refusal(principal, action, { unit }, decision, {
      workspace,
      why: `a rule denies it in ${where} (remove that deny, or act on the workspaces one by one)`,
    });
  }

  /** The `forbidden` error for a refused decision, recorded as `authz.denied` (and counted). */
  refusal(
    principal: Principal,
    action: Action,
    resource: Resource,
    decision: Explained,
    /** A unit-wide refusal: the workspace whose deny decided (audited), and why (shown). */
    inWorkspace?: { workspace: string; why: string },
  ): DomainError {
    this.metrics?.authzDecided(false);
    const where =
      resource.workspace !== undefined && resource.unit !== '*'
        ? `${resource.unit} (workspace ${resource.workspace})`
        : resource.unit;
    this.audit.record({
      type: 'authz.denied',
      actor: principal.subject,
      outcome: 'denied',
      action,
      unit: resource.unit === '*' ? undefined : resource.unit,
      workspace: inWorkspace?.workspace ?? resource.workspace,
      details: { rule: decision.rule?.source ?? null },
    });
    const why = inWorkspace ? `: ${inWorkspace.why}` : '';
    return new DomainError('forbidden', `${principal.subject} may not ${action} on ${where}${why}`);
  }

  async explain(principal: Subject, action: Action, resource: Resource): Promise<Explained> {
    return (await this.decider(principal)).explain(action, resource);
  }

  /** Reads the principal's rules (cached) for decisions made later without the database. */
  async decider(principal: Subject): Promise<Decider> {
    if (principal.kind === 'bootstrap') return constantly({ allowed: true, reason: 'bootstrap' });
    if (!(await this.initialised())) {
      const answer = (action: Action): Explained => ({
        allowed: !ADMIN_ONLY.has(action),
        reason: 'not-initialised',
      });
      return { explain: answer, explainUnitWide: answer };
    }
    const rules = await this.rulesOf(principal);
    return {
      explain: (action, resource) => explainWith(rules, action, resource),
      explainUnitWide: (action, unit, workspaces) => {
        const d = decideUnitWide(rules, action, unit, workspaces);
        return { ...explained(d), workspace: d.workspace };
      },
    };
  }

  async initialised(): Promise<boolean> {
    const cached = this.cache.getInitialised();
    if (cached !== undefined) return cached;
    const generation = this.cache.generation;
    const value = await this.repo.isInitialised();
    this.cache.setInitialised(value, generation);
    return value;
  }

  private async rulesOf(p: Subject): Promise<CompiledRule[]> {
    const groups = [...(p.groups ?? [])].sort();
    const key = `${p.subject}\u0000${p.email ?? ''}\u0000${groups.join('\u0000')}`;
    const cached = this.cache.getRules(key);
    if (cached) return cached;
    const generation = this.cache.generation;
    const rows = await this.repo.rulesFor(p.subject, p.email, groups);
    const compiled = rows.map((r) =>
      compileRule({
        id: r.id,
        effect: r.effect,
        actions: r.actions as Action[],
        resources: r.resources,
        workspaces: r.workspaces,
        source: `role ${r.role} / permission ${r.permission}`,
      }),
    );
    this.cache.setRules(key, compiled, generation);
    return compiled;
  }
}

function constantly(answer: Explained): Decider {
  return { explain: () => answer, explainUnitWide: () => answer };
}

function explained(d: Decision): Explained {
  return { allowed: d.allowed, reason: d.rule ? 'rule' : 'no-matching-rule', rule: d.rule };
}

function explainWith(
  rules: readonly CompiledRule[],
  action: Action,
  resource: Resource,
): Explained {
  let d = decide(rules, action, resource);
  // unit.read implies reading the outputs (an explicit deny on outputs still wins).
  if (!d.allowed && !d.rule && (action === 'outputs.read' || action === 'outputs.read-sensitive')) {
    const viaRead = decide(rules, 'unit.read', resource);
    if (viaRead.allowed) d = viaRead;
  }
  return explained(d);
}
