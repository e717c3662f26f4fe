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
  /** The provider that runs the machine (see GET /api/v1/providers). */
  provider: string;
  /** Where the machine would run, when the provider says. */
  region?: string;
  /**
   * What a rental of this offer may set in `machine` beyond the environment variables (which
   * every offer takes). A rental asking for more than this is refused; a GPU-intent rental is
   * matched only to offers that can honour its `machine`.
   */
  capabilities: OfferCapabilitiesDto;
  /**
   * What the internet traffic the machine moves costs, charged as used on top of the hourly
   * price (the host bills it per GB; markup included). Absent: traffic is free.
   */
  trafficPricePerGb?: TrafficPriceDto;
}

/** Per-GB traffic prices, in millionths of a USD (10000 = one cent per GB). */
export interface TrafficPriceDto {
  /**
   * Per GB the machine sends.
   * @isInt
   * @example 34500
   */
  upMicroUsd: number;
  /**
   * Per GB the machine receives.
   * @isInt
   * @example 34500
   */
  downMicroUsd: number;
}

/** What an offer's machine can be given beyond the defaults. */
export interface OfferCapabilitiesDto {
  /**
   * The rental may name its own container image (`machine.image`).
   * @example true
   */
  customImage: boolean;
  /**
   * The rental may give a startup script (`machine.startupScript`), run once after boot.
   * @example true
   */
  startupScript: boolean;
  /**
   * How many TCP ports the rental may expose over HTTP(S) (`machine.ports`); 0: none.
   * @isInt
   * @example 5
   */
  ports: number;
  /**
   * Largest disk the rental may ask for (`machine.diskGb`), in GB; null: the disk cannot be chosen.
   * @isInt
   * @example 500
   */
  maxDiskGb: number | null;
}

export interface GpuModelDto {
  /** The model's catalog slug, e.g. `h100-sxm`: the same for every provider's spelling. */
  slug: string;
  /** The model's one display name, e.g. "H100 SXM". */
  name: string;
  /** The family a bare query matches, e.g. `h100` for H100 SXM, PCIe and NVL. */
  family: string;
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
  /** Providers with a current offer of the model. */
  providers: string[];
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

export type ProviderHealth = 'ok' | 'degraded' | 'down';

/** One configured GPU provider and how its inventory refreshes are going. */
export interface ProviderStatusDto {
  id: string;
  description: string;
  /**
   * `ok`: the latest refresh succeeded. `degraded`: it failed, but the provider's offers from its
   * last success are still live. `down`: no live offers (refreshes failing beyond the offer age
   * bound, or none succeeded yet).
   */
  status: ProviderHealth;
  /** @format date-time */
  lastRefreshAt: string | null;
  /** @format date-time */
  lastSuccessAt: string | null;
  /**
   * The provider's offers currently listed on /offers.
   * @isInt
   */
  offerCount: number;
  /** Class of the latest failed refresh (`auth`, `rate_limited`, `unavailable`, `timeout`, `bad_response`, `request`, `internal`); null if none failed yet. */
  lastErrorClass: string | null;
  /** @format date-time */
  lastErrorAt: string | null;
}

/** One configured GPU provider as `GET /api/v1/providers` lists it: its refreshes and its drift. */
export interface ProviderDto extends ProviderStatusDto {
  /**
   * What the drift report holds of this provider: answers its plugin could not fully read (a state,
   * field shape, error body or page shape it does not know), recorded once per shape. The operator
   * lists them with `owner providers drift`.
   */
  drift: ProviderDriftDto;
}

/** A provider's shapes in the drift report. */
export interface ProviderDriftDto {
  /**
   * Distinct shapes recorded.
   * @isInt
   */
  shapes: number;
  /**
   * Times they were seen, in all.
   * @isInt
   */
  seen: number;
}
