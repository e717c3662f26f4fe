/** A rentable offer. Prices are USD cents per hour for the whole instance. */
export interface OfferDto {
  /** Identifier used to rent the offer. Not stable across inventory changes. @format uuid */
  id: string;
  /** Grouping label of the GPU. */
  category: string;
  /** GPU model name. */
  name: string;
  /** VRAM per GPU. */
  vramGb: number | null;
  gpuCount: number;
  cpuCores?: number;
  memoryGb?: number;
  storageGb?: number;
  /** USD cents per hour for the whole instance. */
  pricePerHourMinor: number;
  currency: string;
  /** Longest rental the offer allows. */
  maximumDurationSeconds: number;
}

export interface GpuModelDto {
  slug: string;
  name: string;
  category: string;
  vramGb: number | null;
  availableOffers: number;
  availableGpus: number;
  /** Cheapest current price, cents per hour for the whole instance. */
  minPricePerHourMinor: number;
  /** Dearest current price, cents per hour for the whole instance. */
  maxPricePerHourMinor: number;
  /** The offer id to buy the cheapest. @format uuid */
  cheapestOfferId: string;
  currency: string;
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
  /** Number of models. */
  count: number;
  /** @format uri */
  offersUrl: string;
  models: GpuModelDto[];
}

export interface GpuModelDetailDto extends GpuModelDto {
  offers: OfferDto[];
}
