import { Controller, Get, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { Public } from '../common/route-auth';
import { TerraformLoginService } from './terraform-login.service';

/** Where each service Terraform looks for lives (relative: resolved against this document's URL). */
export function discoveryDocument(login?: Record<string, unknown>): Record<string, unknown> {
  return {
    'tfe.v2': '/api/v2/',
    'tfe.v2.1': '/api/v2/',
    'tfe.v2.2': '/api/v2/',
    ...(login ? { 'login.v1': login } : {}),
  };
}

/**
 * Terraform's service discovery (`GET https://<host>/.well-known/terraform.json`): public —
 * Terraform sends its token here too, and nothing here is secret. Terraform fetches it over
 * https only, so a server Terraform's `cloud {}` block talks to serves TLS
 * (STATEHOUSE_TLS_CERT_FILE) or sits behind a proxy that does.
 */
@ApiExcludeController()
@Public()
@Controller('.well-known')
export class DiscoveryController {
  constructor(private readonly login: TerraformLoginService) {}

  /** `login.v1` only with an OpenID provider: without one Terraform offers to paste a token. */
  @Get('terraform.json')
  discovery(@Res() res: Response): void {
    const login = this.login.enabled ? this.login.discovery() : undefined;
    res
      .status(200)
      .type('application/json')
      .send(JSON.stringify(discoveryDocument(login)));
  }
}
