import type { Principal } from '../common/principal';
import type { AuthorizationService } from '../rbac/authorization.service';
import { NodeRef, nodeKey } from './graph-model';

/**
 * What a principal may read of producers, asked once per producer: its outputs
 * (`outputs.read`), and its sensitive ones too (`unit.read`, which serves the whole state, or
 * `outputs.read-sensitive` on top of `outputs.read`).
 */
export function producerRights(
  authz: AuthorizationService,
  principal: Principal,
): {
  outputs: (n: NodeRef) => Promise<boolean>;
  sensitive: (n: NodeRef) => Promise<boolean>;
} {
  const memo = (f: (n: NodeRef) => Promise<boolean>) => {
    const seen = new Map<string, Promise<boolean>>();
    return (n: NodeRef) => {
      const k = nodeKey(n);
      let p = seen.get(k);
      if (!p) seen.set(k, (p = f(n)));
      return p;
    };
  };
  const outputs = memo((n) => authz.can(principal, 'outputs.read', n));
  const sensitive = memo(
    async (n) =>
      (await authz.can(principal, 'unit.read', n)) ||
      ((await outputs(n)) && (await authz.can(principal, 'outputs.read-sensitive', n))),
  );
  return { outputs, sensitive };
}
