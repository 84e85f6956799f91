import { Controller, Delete, HttpCode } from '@nestjs/common';
import { ApiBearerAuth, ApiNoContentResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AuthorizationService } from '../rbac/authorization.service';
import { CurrentPrincipal } from './auth.decorators';
import { BootstrapTokenService } from './bootstrap-token.service';
import type { Principal } from './principal';

@ApiTags('auth')
@ApiBearerAuth()
@Controller('v1/auth')
export class AuthController {
  constructor(
    private readonly bootstrap: BootstrapTokenService,
    private readonly authz: AuthorizationService,
  ) {}

  @Delete('bootstrap')
  @HttpCode(204)
  @ApiOperation({
    summary: 'Disable the generated bootstrap token',
    description:
      'Stops the token generated on first start from authenticating. A token configured with STATEHOUSE_BOOTSTRAP_TOKEN is removed from the environment instead.',
  })
  @ApiNoContentResponse()
  async disableBootstrap(@CurrentPrincipal() principal: Principal): Promise<void> {
    await this.authz.authorize(principal, 'rbac.manage', { unit: '*' });
    await this.bootstrap.disableGenerated(principal.subject);
  }
}
