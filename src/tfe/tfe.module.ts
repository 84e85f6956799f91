import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { RbacModule } from '../rbac/rbac.module';
import { StateModule } from '../state/state.module';
import { DiscoveryController } from './discovery.controller';
import { TfeController, TfeFallbackController } from './tfe.controller';
import { TfeRepository } from './tfe.repository';
import { TfeStateVersionsService } from './tfe-state-versions.service';
import { TfeWorkspacesService } from './tfe-workspaces.service';

/** The TFE door (`/api/v2`, `/.well-known/terraform.json`). The fallback controller comes last. */
@Module({
  imports: [AuthModule, RbacModule, StateModule],
  controllers: [DiscoveryController, TfeController, TfeFallbackController],
  providers: [TfeRepository, TfeWorkspacesService, TfeStateVersionsService],
})
export class TfeModule {}
