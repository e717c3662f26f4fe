import { Extension, Get, OperationId, Path, Query, Request, Response, Route, Tags } from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import type { Envelope, ErrorEnvelope } from '../../errors/envelope.js';
import { BaseController } from '../../http/controller-base.js';
import type { InventoryService } from './inventory.service.js';
import type { GpuModelDetailDto, GpuSummaryDto, OfferDto } from './inventory.dto.js';

@Route('api/v1')
@Tags('Inventory')
export class InventoryController extends BaseController {
  constructor(private readonly inventory: InventoryService) {
    super();
  }

  /**
   * Every available offer, cheapest first. The canonical source of inventory and prices;
   * no credential needed, readable cross-origin, and ETag'd (send If-None-Match for a 304).
   * @param gpu Only offers of this GPU family ("H100", "4090": every model of it) or model (a slug from /gpus such as "h100-sxm", or any spelling: "NVIDIA H100 SXM", "A100 80GB").
   * @param maxTrafficMicroUsdPerGb Only offers whose internet traffic costs at most this per GB, each way, in millionths of a USD (`trafficPricePerGb`); 0: only offers with free traffic.
   * @isInt maxTrafficMicroUsdPerGb
   * @minimum maxTrafficMicroUsdPerGb 0
   * @maximum maxTrafficMicroUsdPerGb 1000000000
   */
  @Get('offers')
  @OperationId('listOffers')
  @Extension('x-etagged', true)
  async offers(
    @Request() req: ExRequest,
    @Query() gpu?: string,
    @Query() maxTrafficMicroUsdPerGb?: number,
  ): Promise<Envelope<OfferDto[]>> {
    return this.cached(req, await this.inventory.listOffers(gpu, maxTrafficMicroUsdPerGb).wait());
  }

  /**
   * One available offer by id, as GET /api/v1/offers lists it: its price, shape and the
   * `capabilities` a rental's `machine` may use. An offer no longer listed is a 404.
   */
  @Get('offers/{id}')
  @OperationId('getOffer')
  @Extension('x-etagged', true)
  @Response<ErrorEnvelope>(404, 'NOT_FOUND')
  async offer(@Request() req: ExRequest, @Path() id: string): Promise<Envelope<OfferDto>> {
    return this.cached(req, await this.inventory.offer(id).wait());
  }

  /** Per-model view of the same offers. */
  @Get('gpus')
  @OperationId('listGpus')
  @Extension('x-etagged', true)
  async gpus(@Request() req: ExRequest): Promise<Envelope<GpuSummaryDto>> {
    return this.cached(req, await this.inventory.gpuSummary().wait());
  }

  /** One GPU model and its offers, by slug or by any spelling that names exactly one model. */
  @Get('gpus/{slug}')
  @OperationId('getGpu')
  @Extension('x-etagged', true)
  @Response<ErrorEnvelope>(404, 'NOT_FOUND')
  async gpu(@Request() req: ExRequest, @Path() slug: string): Promise<Envelope<GpuModelDetailDto>> {
    return this.cached(req, await this.inventory.gpuModel(slug).wait());
  }
}
