import { Global, Module } from '@nestjs/common';
import { AUDIT_READ_AUTHORIZER, AuditReadAuthorizer } from '../audit/audit-read-authorizer';
import { AuthorizationService } from './authorization.service';
import { RbacCache } from './rbac-cache';
import { RbacController } from './rbac.controller';
import { RbacRepository } from './rbac.repository';
import { RbacService } from './rbac.service';

@Global()
@Module({
  controllers: [RbacController],
  providers: [
    AuthorizationService,
    RbacRepository,
    RbacCache,
    RbacService,
    {
      // The audit module's question, answered here: reading the log needs audit.read on every unit.
      provide: AUDIT_READ_AUTHORIZER,
      useFactory: (authz: AuthorizationService): AuditReadAuthorizer => ({
        authorizeRead: (principal) => authz.authorize(principal, 'audit.read', { unit: '*' }),
      }),
      inject: [AuthorizationService],
    },
  ],
  exports: [AuthorizationService, RbacRepository, RbacCache, AUDIT_READ_AUTHORIZER],
})
export class RbacModule {}
