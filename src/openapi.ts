import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';

/** The OpenAPI document the server serves at /docs and the repository commits. */
export function buildOpenApi(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('Statehouse')
    .setDescription(
      'Management API of Statehouse, a control plane for Terraform and OpenTofu state. ' +
        'Terraform itself uses the http backend at /v1/backend/{unit} (see the README).',
    )
    .setVersion('1')
    .addBearerAuth({
      type: 'http',
      scheme: 'bearer',
      description: 'Bootstrap token, access token or API token',
    })
    .build();
  return SwaggerModule.createDocument(app, config, {
    operationIdFactory: (controller, method) =>
      `${controller.replace(/Controller$/, '')}_${method}`,
  });
}
