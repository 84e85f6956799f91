import { Controller, Get, Header } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Public } from '../common/route-auth';
import { SigningKeys } from './tokens/signing-keys.service';

@ApiTags('auth')
@Public()
@Controller('.well-known')
export class JwksController {
  constructor(private readonly keys: SigningKeys) {}

  @Get('jwks.json')
  @Header('Cache-Control', 'public, max-age=300')
  @ApiOperation({ summary: 'Public keys that verify Statehouse access tokens (JWKS)' })
  @ApiOkResponse({ description: '{"keys":[{"kty":"OKP","crv":"Ed25519","x":…,"kid":…}]}' })
  jwks(): { keys: unknown[] } {
    return this.keys.jwks();
  }
}
