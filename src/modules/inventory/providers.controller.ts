import { Get, OperationId, Request, Route, Tags } from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import type { Envelope } from '../../errors/envelope.js';
import { BaseController } from '../../http/controller-base.js';
import type { InventoryService } from './inventory.service.js';
import type { ProviderDto } from './inventory.dto.js';

@Route('api/v1')
@Tags('Inventory')
export class ProvidersController extends BaseController {
  constructor(private readonly inventory: InventoryService) {
    super();
  }

  /**
   * The GPU providers this service rents from, each with the outcome of its inventory refreshes:
   * when it last answered, how many of its offers are listed, the class of its latest failure, and
   * how many answers its plugin could not fully read (the drift report). No credential needed.
   */
  @Get('providers')
  @OperationId('listProviders')
  async providers(@Request() req: ExRequest): Promise<Envelope<ProviderDto[]>> {
    return this.ok(req, await this.inventory.providerListing());
  }
}
