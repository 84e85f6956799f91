import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { StateModule } from '../state/state.module';
import { BucketRepository } from './bucket.repository';
import { MultipartRepository } from './multipart.repository';
import { ReplayGuardService } from './replay-guard.service';
import { S3AuthService } from './s3-auth.service';
import { S3Controller } from './s3.controller';
import { S3ReadRoute } from './s3-read.route';
import { S3WriteRoute } from './s3-write.route';
import { S3ListRoute } from './s3-list.route';
import { S3MultipartService } from './s3-multipart.service';
import { S3ObjectsService } from './s3-objects.service';
import { UsedSignatureRepository } from './used-signature.repository';

@Module({
  imports: [AuthModule, StateModule],
  controllers: [S3Controller],
  providers: [
    S3AuthService,
    S3ObjectsService,
    S3MultipartService,
    MultipartRepository,
    BucketRepository,
    ReplayGuardService,
    UsedSignatureRepository,
    S3ReadRoute,
    S3WriteRoute,
    S3ListRoute,
  ],
  exports: [S3ReadRoute, S3WriteRoute, S3ListRoute],
})
export class S3Module {}
