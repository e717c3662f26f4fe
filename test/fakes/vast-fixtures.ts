/** An offer as `POST /api/v0/bundles/` returns it (the documented fields; Vast sends many more). */
export interface FakeVastOffer {
  id: number;
  ask_contract_id: number;
  gpu_name: string;
  num_gpus: number;
  gpu_ram: number;
  gpu_total_ram: number;
  cpu_cores_effective: number;
  cpu_ram: number;
  gpu_frac: number;
  disk_space: number;
  dph_total: number;
  duration: number;
  geolocation: string | null;
  hosting_type: number;
  /** Absent in raw search output (only `verification`); the fake's search derives it. */
  verified?: boolean;
  verification: string;
  rentable: boolean;
  rented: boolean;
  reliability2: number;
  /** USD per GB uploaded / downloaded, billed apart from `dph_total` (recorded mode). */
  inet_up_cost?: number;
  inet_down_cost?: number;
  /** USD per GB of disk and month (720 h); `dph_total` includes the searched `allocated_storage`. Absent: disk is free. */
  storage_cost?: number;
  /** The same prices per TB. */
  internet_up_cost_per_tb?: number;
  internet_down_cost_per_tb?: number;
}

export function offer(
  id: number,
  gpu: string,
  n: number,
  gpuRamMb: number,
  dph: number,
  extra: Partial<FakeVastOffer> = {},
): FakeVastOffer {
  return {
    id,
    ask_contract_id: id,
    gpu_name: gpu,
    num_gpus: n,
    gpu_ram: gpuRamMb,
    gpu_total_ram: gpuRamMb * n,
    cpu_cores_effective: 16 * n,
    cpu_ram: 128_000 * n,
    gpu_frac: 1,
    disk_space: 500,
    dph_total: dph,
    duration: 14 * 86_400 + 0.75,
    geolocation: 'Texas, US',
    hosting_type: 1,
    verified: true,
    verification: 'verified',
    rentable: true,
    rented: false,
    reliability2: 0.995,
    ...extra,
  };
}

/** The default inventory: the shapes the tests and the end-to-end suite rely on, plus oddities. */
export const FAKE_VAST_OFFERS: readonly FakeVastOffer[] = [
  offer(7100001, 'H100 SXM', 1, 81_559, 2.1),
  offer(7100002, 'H100 SXM', 2, 81_559, 4.2, { geolocation: 'Quebec, CA' }),
  offer(7100003, 'RTX 4090', 1, 24_564, 0.35, {
    hosting_type: 0,
    geolocation: 'Lisbon, PT',
    cpu_cores_effective: 12.8,
    cpu_ram: 257_000,
    gpu_frac: 0.25,
  }),
  offer(7100004, 'A100 SXM4', 1, 81_920, 1.2),
  // Oddities: a fractional price, a host allowing years, an unverified and a rented machine.
  offer(7100005, 'RTX 3090', 1, 24_576, 0.3512, { hosting_type: 0, geolocation: null, duration: 400 * 86_400 }),
  offer(7100006, 'RTX 4090', 1, 24_564, 0.21, { verified: false, verification: 'unverified' }),
  offer(7100007, 'L40S', 1, 46_068, 0.8, { rented: true, rentable: false }),
];
