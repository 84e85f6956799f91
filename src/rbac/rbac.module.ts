import { Global, Module } from '@nestjs/common';
import { AuthorizationService } from './authorization.service';
import { RbacCache } from './rbac-cache';
import { RbacRepository } from './rbac.repository';

@Global()
@Module({
  providers: [AuthorizationService, RbacRepository, RbacCache],
  exports: [AuthorizationService, RbacRepository, RbacCache],
})
export class RbacModule {}
