/** A rentable offer. Prices are USD cents per hour for the whole instance. */
export interface OfferDto {
  /** Identifier used to rent the offer. Not stable across inventory changes. @format uuid */
  id: string;
  /** Grouping label of the GPU. */
  category: string;
  /** GPU model name. */
  name: string;
  /**
   * VRAM per GPU.
   * @isInt
   */
  vramGb: number | null;
  /** @isInt */
  gpuCount: number;
  /** @isInt */
  cpuCores?: number;
  /** @isInt */
  memoryGb?: number;
  /** @isInt */
  storageGb?: number;
  /**
   * USD cents per hour for the whole instance.
   * @isInt
   */
  pricePerHourMinor: number;
  currency: string;
  /**
   * Longest rental the offer allows.
   * @isInt
   */
  maximumDurationSeconds: number;
}

export interface GpuModelDto {
  slug: string;
  name: string;
  category: string;
  /** @isInt */
  vramGb: number | null;
  /** @isInt */
  availableOffers: number;
  /** @isInt */
  availableGpus: number;
  /**
   * Cheapest current price, cents per hour for the whole instance.
   * @isInt
   */
  minPricePerHourMinor: number;
  /**
   * Dearest current price, cents per hour for the whole instance.
   * @isInt
   */
  maxPricePerHourMinor: number;
  /** The offer id to buy the cheapest. @format uuid */
  cheapestOfferId: string;
  currency: string;
  /** @isInt */
  maximumDurationSeconds: number;
  /** @format uri */
  url: string;
  /** @format uri */
  offersUrl: string;
}

export interface GpuSummaryDto {
  /** @format date-time */
  generatedAt: string;
  /** States the unit of every price. */
  unit: string;
  /**
   * Number of models.
   * @isInt
   */
  count: number;
  /** @format uri */
  offersUrl: string;
  models: GpuModelDto[];
}

export interface GpuModelDetailDto extends GpuModelDto {
  offers: OfferDto[];
}
