import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { RbacModule } from '../rbac/rbac.module';
import { StateModule } from '../state/state.module';
import { DiscoveryController } from './discovery.controller';
import { TfeController, TfeFallbackController } from './tfe.controller';
import { TerraformLoginController } from './terraform-login.controller';
import { TerraformLoginRepository } from './terraform-login.repository';
import { TerraformLoginService } from './terraform-login.service';
import { TfeRepository } from './tfe.repository';
import { TfeStateVersionsService } from './tfe-state-versions.service';
import { TfeWorkspacesService } from './tfe-workspaces.service';

/**
 * The TFE door (`/api/v2`, `/.well-known/terraform.json`) and `terraform login`
 * (`/oauth/terraform/*`). The fallback controller comes last.
 */
@Module({
  imports: [AuthModule, RbacModule, StateModule],
  controllers: [
    DiscoveryController,
    TerraformLoginController,
    TfeController,
    TfeFallbackController,
  ],
  providers: [
    TfeRepository,
    TfeWorkspacesService,
    TfeStateVersionsService,
    TerraformLoginRepository,
    TerraformLoginService,
  ],
})
export class TfeModule {}
