import { Global, Module } from '@nestjs/common';
import { AuthorizationService } from './authorization.service';
import { RbacCache } from './rbac-cache';
import { RbacController } from './rbac.controller';
import { RbacRepository } from './rbac.repository';
import { RbacService } from './rbac.service';

@Global()
@Module({
  controllers: [RbacController],
  providers: [AuthorizationService, RbacRepository, RbacCache, RbacService],
  exports: [AuthorizationService, RbacRepository, RbacCache],
})
export class RbacModule {}
