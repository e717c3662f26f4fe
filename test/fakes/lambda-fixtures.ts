/** Instance types and regions of the fake Lambda Cloud API, shaped as API 1.8.3 documents them. */

export interface FakeLambdaRegion {
  name: string;
  description: string;
}

export interface FakeLambdaInstanceType {
  name: string;
  description: string;
  gpu_description: string;
  price_cents_per_hour: number;
  specs: { vcpus: number; memory_gib: number; storage_gib: number; gpus: number };
}

/** One entry of `GET /api/v1/instance-types` data. */
export interface FakeLambdaInstanceTypeItem {
  instance_type: FakeLambdaInstanceType;
  regions_with_capacity_available: FakeLambdaRegion[];
}

/** `PublicRegionCode` as the document enumerates it: launches elsewhere are invalid parameters. */
export const LAMBDA_REGION_CODES = [
  'europe-central-1',
  'asia-south-1',
  'australia-east-1',
  'me-west-1',
  'asia-northeast-1',
  'asia-northeast-2',
  'us-east-1',
  'us-west-2',
  'us-west-1',
  'us-south-1',
  'us-west-3',
  'us-midwest-1',
  'us-east-2',
  'us-south-2',
  'us-south-3',
  'us-east-3',
  'us-midwest-2',
];

const usEast1 = { name: 'us-east-1', description: 'Virginia, USA' };
const usWest1 = { name: 'us-west-1', description: 'California, USA' };
const usSouth1 = { name: 'us-south-1', description: 'Texas, USA' };

const type = (
  name: string,
  gpus: number,
  gpu: string,
  cents: number,
  specs: { vcpus: number; memory_gib: number; storage_gib: number },
  regions: FakeLambdaRegion[],
): [string, FakeLambdaInstanceTypeItem] => [
  name,
  {
    instance_type: {
      name,
      description: `${gpus}x ${gpu}`,
      gpu_description: gpu,
      price_cents_per_hour: cents,
      specs: { ...specs, gpus },
    },
    regions_with_capacity_available: regions,
  },
];

/** The default inventory: realistic on-demand prices; `gpu_8x_a100` has no region with capacity. */
export const DEFAULT_LAMBDA_INSTANCE_TYPES: Record<string, FakeLambdaInstanceTypeItem> = Object.fromEntries([
  type('gpu_1x_h100_sxm5', 1, 'H100 (80 GB SXM5)', 329, { vcpus: 26, memory_gib: 225, storage_gib: 2867 }, [usEast1]),
  type('gpu_8x_h100_sxm5', 8, 'H100 (80 GB SXM5)', 2632, { vcpus: 208, memory_gib: 1800, storage_gib: 22928 }, [
    usEast1,
    usSouth1,
  ]),
  type('gpu_1x_a100_sxm4', 1, 'A100 (40 GB SXM4)', 129, { vcpus: 30, memory_gib: 200, storage_gib: 512 }, [
    usWest1,
    usEast1,
  ]),
  type('gpu_1x_a10', 1, 'A10 (24 GB PCIe)', 75, { vcpus: 30, memory_gib: 200, storage_gib: 1400 }, [usWest1]),
  type('gpu_8x_a100', 8, 'A100 (40 GB SXM4)', 1032, { vcpus: 124, memory_gib: 1800, storage_gib: 6144 }, []),
]);
