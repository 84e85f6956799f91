import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsDateString, IsOptional, IsString, Matches, MaxLength, MinLength } from 'class-validator';

export class AuthConfigView {
  @ApiPropertyOptional({
    type: String,
    nullable: true,
    description: 'OpenID provider issuer (null: OIDC login not configured)',
  })
  issuer!: string | null;
  @ApiPropertyOptional({
    type: String,
    nullable: true,
    description: 'Public client id the CLI logs in with (PKCE)',
  })
  client_id!: string | null;
  @ApiProperty({ type: [String] })
  scopes!: string[];
  @ApiProperty({ description: 'This server’s public URL (token issuer)' })
  public_url!: string;
}

export class ExchangeDto {
  @ApiProperty({ description: 'ID token from the configured OpenID provider' })
  @IsString()
  @MinLength(1)
  @MaxLength(16384)
  id_token!: string;

  @ApiPropertyOptional({ description: 'The nonce the client sent in its authorization request' })
  @IsOptional()
  @IsString()
  @MaxLength(512)
  nonce?: string;
}

export class RefreshDto {
  @ApiProperty()
  @IsString()
  @MinLength(1)
  @MaxLength(512)
  refresh_token!: string;
}

export class TokenResponseView {
  @ApiProperty()
  access_token!: string;
  @ApiProperty()
  refresh_token!: string;
  @ApiProperty({ example: 'Bearer' })
  token_type!: string;
  @ApiProperty({ description: 'Seconds until the access token expires' })
  expires_in!: number;
}

export class ProcessCredentialsView {
  @ApiProperty({ example: 1 })
  Version!: number;
  @ApiProperty()
  AccessKeyId!: string;
  @ApiProperty()
  SecretAccessKey!: string;
  @ApiProperty()
  SessionToken!: string;
  @ApiProperty({ example: '2026-11-30T12:00:00Z' })
  Expiration!: string;
}

export class MeView {
  @ApiProperty({ example: 'user:00u1abcd' })
  subject!: string;
  @ApiProperty({ enum: ['bootstrap', 'user', 'service'] })
  kind!: string;
  @ApiProperty({
    enum: ['bootstrap-token', 'auth-disabled', 'access-token', 'api-token', 's3-signature'],
  })
  via!: string;
  @ApiPropertyOptional()
  email?: string;
  @ApiPropertyOptional({ type: [String] })
  groups?: string[];
}

export class CreateApiTokenDto {
  @ApiProperty({ example: 'ci-network-prod', description: 'A name to recognise the token by' })
  @IsString()
  @Matches(/^[A-Za-z0-9 ._:/-]{1,100}$/, {
    message: 'name: 1 to 100 letters, digits, spaces or . _ : / -',
  })
  name!: string;

  @ApiPropertyOptional({
    example: 'svc:ci-network',
    description: 'Act as a service principal (needs token.manage); default: yourself',
  })
  @IsOptional()
  @IsString()
  @MaxLength(66)
  subject?: string;

  @ApiPropertyOptional({
    example: '2027-06-30T00:00:00Z',
    description: 'Expiry (ISO 8601); default: never',
  })
  @IsOptional()
  @IsDateString()
  expiresAt?: string;
}

export class ApiTokenView {
  @ApiProperty()
  id!: string;
  @ApiProperty()
  name!: string;
  @ApiProperty()
  subject!: string;
  @ApiProperty()
  createdBy!: string;
  @ApiProperty()
  createdAt!: string;
  @ApiPropertyOptional({ type: String, nullable: true })
  expiresAt!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true })
  lastUsedAt!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true })
  revokedAt!: string | null;
}

export class CreatedApiTokenView extends ApiTokenView {
  @ApiProperty({ description: 'The secret, shown only now (prefix sht_)' })
  token!: string;
}
