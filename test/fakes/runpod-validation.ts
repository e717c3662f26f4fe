/**
 * `CreatePodRequest` checks as the v2 API makes them before its handler runs: the schema has
 * `unevaluatedProperties: false`, so any field it does not name is a 422, as are wrong types.
 * Messages follow the API's `errors` entries ("$: additional properties 'bogus' not allowed").
 */
const TOP_LEVEL = new Set([
  'args',
  'disk',
  'env',
  'image',
  'ports',
  'registry',
  'name',
  'cloud',
  'cpu',
  'dataCenterIds',
  'globalNetworking',
  'gpu',
  'mounts',
  'startJupyter',
  'startSsh',
  'templateId',
]);
const GPU_FIELDS = new Set(['id', 'count', 'allowedCudaVersions', 'minCudaVersion']);
const CPU_FIELDS = new Set(['id', 'vcpuCount']);
const CUDA = /^\d+\.\d+$/;

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);
const isStringArray = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === 'string');

function unknownFields(where: string, obj: Record<string, unknown>, allowed: Set<string>): string[] {
  return Object.keys(obj)
    .filter((k) => !allowed.has(k))
    .map((k) => `${where}: additional properties '${k}' not allowed`);
}

/** The 422 `errors` for a create body; empty when the body matches the contract. */
export function validateCreatePod(body: unknown): string[] {
  if (!isObject(body)) return ['$: expected object'];
  const errors = unknownFields('$', body, TOP_LEVEL);
  if (typeof body.name !== 'string' || body.name.length < 1)
    errors.push("$: missing property 'name' or 'name' is not a non-empty string");
  if (body.templateId === undefined && typeof body.image !== 'string') errors.push("$: missing property 'image'");
  if (body.image !== undefined && typeof body.image !== 'string') errors.push('$.image: expected string');
  if (body.args !== undefined && typeof body.args !== 'string') errors.push('$.args: expected string');
  if (body.disk !== undefined && !(Number.isInteger(body.disk) && (body.disk as number) >= 1))
    errors.push('$.disk: expected integer >= 1');
  if (body.ports !== undefined && !isStringArray(body.ports)) errors.push('$.ports: expected array of strings');
  if (body.dataCenterIds !== undefined && !isStringArray(body.dataCenterIds))
    errors.push('$.dataCenterIds: expected array of strings');
  if (body.env !== undefined && !(isObject(body.env) && Object.values(body.env).every((x) => typeof x === 'string')))
    errors.push('$.env: expected object of strings');
  if (body.cloud !== undefined && body.cloud !== 'SECURE' && body.cloud !== 'COMMUNITY')
    errors.push("$.cloud: value must be one of 'SECURE', 'COMMUNITY'");
  for (const flag of ['globalNetworking', 'startJupyter', 'startSsh']) {
    if (body[flag] !== undefined && typeof body[flag] !== 'boolean') errors.push(`$.${flag}: expected boolean`);
  }
  if (body.gpu !== undefined) {
    if (!isObject(body.gpu)) errors.push('$.gpu: expected object');
    else {
      errors.push(...unknownFields('$.gpu', body.gpu, GPU_FIELDS));
      if (typeof body.gpu.id !== 'string') errors.push("$.gpu: missing property 'id'");
      if (body.gpu.count !== undefined && !(Number.isInteger(body.gpu.count) && (body.gpu.count as number) >= 1))
        errors.push('$.gpu.count: expected integer >= 1');
      // RunPod accepts CUDA host constraints on a GPU pod (`CreateGpuConfig`), as `major.minor`.
      const { allowedCudaVersions: allowed, minCudaVersion: min } = body.gpu;
      if (allowed !== undefined && !(isStringArray(allowed) && (allowed as string[]).every((v) => CUDA.test(v))))
        errors.push('$.gpu.allowedCudaVersions: expected array of "major.minor" strings');
      if (min !== undefined && !(typeof min === 'string' && CUDA.test(min)))
        errors.push('$.gpu.minCudaVersion: expected a "major.minor" string');
    }
  }
  if (body.cpu !== undefined) {
    if (!isObject(body.cpu)) errors.push('$.cpu: expected object');
    else errors.push(...unknownFields('$.cpu', body.cpu, CPU_FIELDS));
  }
  return errors;
}

/** An entry of `ports`: a port number and a protocol RunPod publishes (`http` through its proxy, `tcp` directly). */
const PORT_ENTRY = /^([1-9]\d{0,4})\/(http|tcp)$/;

/**
 * The 400 `detail` for a `ports` list the schema lets through (an array of strings) but the pod
 * cannot publish: an entry not of the form port/protocol, a port above 65535, or a port listed
 * twice. RunPod documents the form ("formatted as port/protocol"), not these refusals; the wording
 * is this fake's. Null when the list is fine.
 */
export function portsRefusal(ports: unknown): string | null {
  if (!Array.isArray(ports)) return null;
  const seen = new Set<number>();
  for (const entry of ports as string[]) {
    const m = PORT_ENTRY.exec(entry);
    if (!m || Number(m[1]) > 65535) return `ports: "${entry}" is not of the form port/protocol (http or tcp)`;
    const port = Number(m[1]);
    if (seen.has(port)) return `ports: port ${port} is listed more than once`;
    seen.add(port);
  }
  return null;
}
