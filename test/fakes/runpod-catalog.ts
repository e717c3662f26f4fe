/** Availability level as RunPod's catalog reports it. */
export type FakeAvailability = 'NONE' | 'LOW' | 'MEDIUM' | 'HIGH';

/** A GPU type in the fake's catalog, in the shape of the v2 `GpuType` plus the fake's stock. */
export interface FakeRunpodGpu {
  id: string;
  name: string;
  manufacturer: 'NVIDIA' | 'AMD';
  /** VRAM per GPU in GB. */
  memory: number;
  secure: boolean;
  community: boolean;
  /** USD per GPU per hour. */
  price: { secure: number; community: number };
  maxCount: { secure: number; community: number };
  availability: FakeAvailability;
  /** Largest count placeable right now (default `maxCount`); larger counts read NONE and fail to create. */
  stock?: number;
  dataCenterId: string;
  /** CUDA versions (`major.minor`) of the host drivers in stock, oldest first. Default {@link DEFAULT_HOST_CUDA}. */
  cudaVersions?: string[];
}

/** Host drivers when a GPU names none: an older one still in the fleet, and current ones. */
export const DEFAULT_HOST_CUDA = ['12.2', '12.4', '12.8'];

/** Host CUDA versions of a GPU type, oldest first. */
export const hostCuda = (g: FakeRunpodGpu): string[] => g.cudaVersions ?? DEFAULT_HOST_CUDA;

/**
 * Data-center cards run images built for a newer CUDA than their driver (forward compatibility);
 * GeForce cards cannot, so an image newer than the host's driver never starts there.
 */
export const forwardCompatible = (g: FakeRunpodGpu): boolean => g.manufacturer === 'NVIDIA' && !/geforce/i.test(g.name);

/** The default catalog: three GPUs with stock and one with none. */
export const FAKE_RUNPOD_GPUS: FakeRunpodGpu[] = [
  {
    id: 'NVIDIA H100 80GB HBM3',
    name: 'NVIDIA H100 80GB HBM3',
    manufacturer: 'NVIDIA',
    memory: 80,
    secure: true,
    community: false,
    price: { secure: 2.39, community: 0 },
    maxCount: { secure: 8, community: 0 },
    availability: 'HIGH',
    dataCenterId: 'US-KS-2',
  },
  {
    id: 'NVIDIA GeForce RTX 4090',
    name: 'NVIDIA GeForce RTX 4090',
    manufacturer: 'NVIDIA',
    memory: 24,
    secure: true,
    community: true,
    price: { secure: 0.69, community: 0.34 },
    maxCount: { secure: 4, community: 8 },
    availability: 'HIGH',
    dataCenterId: 'EU-RO-1',
  },
  {
    id: 'NVIDIA A100 80GB PCIe',
    name: 'NVIDIA A100 80GB PCIe',
    manufacturer: 'NVIDIA',
    memory: 80,
    secure: true,
    community: true,
    price: { secure: 1.64, community: 1.19 },
    maxCount: { secure: 8, community: 8 },
    availability: 'MEDIUM',
    stock: 4,
    dataCenterId: 'US-TX-3',
  },
  {
    id: 'NVIDIA B200',
    name: 'NVIDIA B200',
    manufacturer: 'NVIDIA',
    memory: 180,
    secure: true,
    community: false,
    price: { secure: 5.99, community: 0 },
    maxCount: { secure: 8, community: 0 },
    availability: 'NONE',
    dataCenterId: 'US-KS-2',
  },
];

/** The catalog entry as `GET /v2/catalog/gpus?include=AVAILABILITY&product=POD` shows it for `count` GPUs. */
export function catalogEntry(
  g: FakeRunpodGpu,
  withAvailability: boolean,
  count: number,
  cloud: 'SECURE' | 'COMMUNITY',
): Record<string, unknown> {
  const entry: Record<string, unknown> = {
    id: g.id,
    name: g.name,
    pool: null,
    manufacturer: g.manufacturer,
    memory: g.memory,
    secure: g.secure,
    community: g.community,
    price: g.price,
    maxCount: g.maxCount,
  };
  if (!withAvailability) return entry;
  const availability = placeable(g, count, cloud) ? g.availability : 'NONE';
  entry.availability = availability;
  if (availability !== 'NONE') {
    entry.dataCenters = [{ id: g.dataCenterId, name: g.dataCenterId, availability }];
    entry.cudaVersions = hostCuda(g).map((version) => ({ version, available: true }));
  }
  return entry;
}

/** Whether `count` GPUs of `g` can be placed in `cloud` now. */
export function placeable(g: FakeRunpodGpu, count: number, cloud: 'SECURE' | 'COMMUNITY'): boolean {
  const side = cloud === 'SECURE' ? 'secure' : 'community';
  return g[side] && g.availability !== 'NONE' && count <= g.maxCount[side] && count <= (g.stock ?? g.maxCount[side]);
}
