import { Injectable, Logger } from '@nestjs/common';
import { currentRequestContext } from '../common/request-context';
import { SecurityEvent } from './security-event';

export type SecurityEventInput = Omit<SecurityEvent, 'at' | 'requestId' | 'clientIp'>;

/** Records security events. The request id and client address come from the request context. */
@Injectable()
export class AuditService {
  private readonly logger = new Logger('audit');

  record(input: SecurityEventInput): SecurityEvent {
    const ctx = currentRequestContext();
    const event: SecurityEvent = {
      ...input,
      requestId: ctx?.requestId,
      clientIp: ctx?.clientIp,
      at: new Date().toISOString(),
    };
    this.logger.log({ msg: `security event ${event.type}`, audit: event });
    return event;
  }
}
