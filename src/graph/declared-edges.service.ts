import { Injectable } from '@nestjs/common';
import { AuditService } from '../audit/audit.service';
import { changeEvent } from '../audit/events';
import type { Principal } from '../common/principal';
import { DomainError, invalidRequest } from '../common/errors';
import { AuthorizationService } from '../rbac/authorization.service';
import { StateRepository } from '../state/state.repository';
import { nodeKey } from './graph-model';
import { GraphRepository } from './graph.repository';
import { GraphService } from './graph.service';
import { consumerOf, EdgeView, nodeOf, producerOf } from './graph.views';
import { producerRights } from './producer-rights';

const OUTPUT_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,127}$/;
const LABEL = /^[A-Za-z0-9_.:-]{1,128}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Edges declared through the API (for dependencies Terraform's state does not show), and their
 * removal. Both ends need `graph.write`; each change is audited in its own transaction.
 * Discovered edges are `GraphWriteHook`'s and follow the consumer's state.
 */
@Injectable()
export class DeclaredEdgesService {
  constructor(
    private readonly repo: GraphRepository,
    private readonly states: StateRepository,
    private readonly authz: AuthorizationService,
    private readonly audit: AuditService,
    private readonly reads: GraphService,
  ) {}

  async declare(
    principal: Principal,
    input: {
      producer: { unit: string; workspace?: string };
      consumer: { unit: string; workspace?: string };
      name?: string;
      outputs?: string[];
      input?: string;
    },
  ): Promise<EdgeView> {
    const producer = nodeOf(input.producer);
    const consumer = nodeOf(input.consumer);
    if (nodeKey(producer) === nodeKey(consumer)) {
      throw invalidRequest(
        'an edge needs two different states (producer and consumer are the same)',
      );
    }
    const name = input.name ?? 'declared';
    if (!LABEL.test(name)) {
      throw invalidRequest('name must be 1 to 128 letters, digits, or . _ : -');
    }
    if (input.outputs !== undefined) {
      if (input.outputs.length === 0 || input.outputs.length > 100) {
        throw invalidRequest('outputs, when given, names 1 to 100 outputs of the producer');
      }
      const bad = input.outputs.find((o) => !OUTPUT_NAME.test(o));
      if (bad !== undefined) throw invalidRequest(`"${bad}" is not an output name`);
    }
    if (input.input !== undefined && !OUTPUT_NAME.test(input.input)) {
      throw invalidRequest(`"${input.input}" is not an input (variable) name`);
    }
    await this.authz.authorize(principal, 'graph.write', producer);
    await this.authz.authorize(principal, 'graph.write', consumer);
    const sensitiveExcluded = !(await producerRights(this.authz, principal).sensitive(producer));
    for (const n of [producer, consumer]) {
      if (!(await this.states.unitExists(n.unit))) {
        throw new DomainError('unit_not_found', `unit ${n.unit} does not exist`);
      }
    }
    const row = await this.repo.transaction(async (m) => {
      const inserted = await this.repo.insertDeclared(m, {
        producer,
        consumer,
        name,
        outputs: input.outputs ? [...new Set(input.outputs)].sort() : null,
        input: input.input ?? null,
        sensitiveExcluded,
        createdBy: principal.subject,
      });
      if (!inserted) {
        throw new DomainError(
          'conflict',
          `an edge named ${name} from ${nodeKey(producer)} to ${nodeKey(consumer)} is already declared`,
        );
      }
      await this.audit.recordIn(
        m,
        changeEvent(principal, 'graph.edge_declared', {
          action: 'graph.write',
          unit: consumer.unit,
          workspace: consumer.workspace,
          door: 'api',
          details: { edge: inserted.id, producer: nodeKey(producer), name },
        }),
      );
      return inserted;
    });
    return this.reads.edgeViewOf(row);
  }

  async remove(principal: Principal, id: string): Promise<void> {
    const row = UUID.test(id) ? await this.repo.findEdge(id) : undefined;
    const visible =
      row !== undefined &&
      (await this.authz.can(principal, 'graph.read', producerOf(row))) &&
      (await this.authz.can(principal, 'graph.read', consumerOf(row)));
    if (!row || !visible) throw new DomainError('not_found', `no edge ${id}`);
    if (row.source === 'discovered') {
      throw new DomainError(
        'conflict',
        'a discovered edge follows the consumer’s state: it goes away when the consumer is applied without that terraform_remote_state',
      );
    }
    await this.authz.authorize(principal, 'graph.write', producerOf(row));
    await this.authz.authorize(principal, 'graph.write', consumerOf(row));
    await this.repo.transaction(async (m) => {
      if (!(await this.repo.deleteEdge(m, id))) throw new DomainError('not_found', `no edge ${id}`);
      await this.audit.recordIn(
        m,
        changeEvent(principal, 'graph.edge_deleted', {
          action: 'graph.write',
          unit: row.consumer_unit,
          workspace: row.consumer_workspace,
          door: 'api',
          details: { edge: id, producer: nodeKey(producerOf(row)), name: row.name },
        }),
      );
    });
  }
}
