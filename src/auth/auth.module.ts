import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { AuthController } from './auth.controller';
import { AuthGuard } from './auth.guard';
import { BootstrapTokenService } from './bootstrap-token.service';
import { CREDENTIAL_VERIFIERS, CredentialVerifier } from './credential-verifier';

@Module({
  controllers: [AuthController],
  providers: [
    BootstrapTokenService,
    {
      provide: CREDENTIAL_VERIFIERS,
      useFactory: (...verifiers: CredentialVerifier[]) => verifiers,
      inject: [BootstrapTokenService],
    },
    { provide: APP_GUARD, useClass: AuthGuard },
  ],
  exports: [BootstrapTokenService],
})
export class AuthModule {}
