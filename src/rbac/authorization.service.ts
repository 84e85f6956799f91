import { Injectable } from '@nestjs/common';
import { AuditService } from '../audit/audit.service';
import { Principal } from '../auth/principal';
import { DomainError } from '../common/errors';
import { Action, Resource } from './actions';
import { CompiledRule, compileRule, decide, Rule } from './policy';
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
  ) {}

  async can(principal: Subject, action: Action, resource: Resource): Promise<boolean> {
    return (await this.explain(principal, action, resource)).allowed;
  }

  /** Throws `forbidden` naming the action and resource when the answer is no (audited). */
  async authorize(principal: Principal, action: Action, resource: Resource): Promise<void> {
    const decision = await this.explain(principal, action, resource);
    if (decision.allowed) return;
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
      workspace: resource.workspace,
      details: { rule: decision.rule?.source ?? null },
    });
    throw new DomainError('forbidden', `${principal.subject} may not ${action} on ${where}`);
  }

  async explain(principal: Subject, action: Action, resource: Resource): Promise<Explained> {
    if (principal.kind === 'bootstrap') return { allowed: true, reason: 'bootstrap' };
    if (!(await this.initialised())) {
      return { allowed: !ADMIN_ONLY.has(action), reason: 'not-initialised' };
    }
    const rules = await this.rulesOf(principal);
    let d = decide(rules, action, resource);
    // unit.read implies reading the outputs (an explicit deny on outputs still wins).
    if (
      !d.allowed &&
      !d.rule &&
      (action === 'outputs.read' || action === 'outputs.read-sensitive')
    ) {
      const viaRead = decide(rules, 'unit.read', resource);
      if (viaRead.allowed) d = viaRead;
    }
    return { allowed: d.allowed, reason: d.rule ? 'rule' : 'no-matching-rule', rule: d.rule };
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
