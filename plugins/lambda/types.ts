/** The parts of Lambda Cloud API objects (documents 1.8.3 to 1.9.3) this plugin reads. */

export interface LambdaRegion {
  name: string;
  description: string;
}

export interface LambdaInstanceType {
  name: string;
  description: string;
  gpu_description: string;
  price_cents_per_hour: number;
  specs: { vcpus: number; memory_gib: number; storage_gib: number; gpus: number };
}

/** `GET /api/v1/instance-types` data: keyed by instance type name. */
export type LambdaInstanceTypes = Record<
  string,
  { instance_type: LambdaInstanceType; regions_with_capacity_available: LambdaRegion[] }
>;

export interface LambdaTag {
  key: string;
  value: string;
}

export interface LambdaInstance {
  id: string;
  name?: string;
  ip?: string;
  status?: string;
  ssh_key_names?: string[];
  region?: LambdaRegion;
  instance_type?: LambdaInstanceType;
  tags?: LambdaTag[];
}

export interface LambdaSshKey {
  id: string;
  name: string;
  public_key: string;
}
