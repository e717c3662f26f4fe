/**
 * Examples for the OpenAPI document, built from the schemas themselves so they always match
 * what the routes accept and return (a hand-written copy would drift with every new field).
 */

type Schema = Record<string, unknown>;

// 43 characters of base64url, the length of every secret part (32 random bytes).
const SECRET = 'qW8vZr2Lx0Yk7Tn4Mb1Pc9Sd6Fg3Hj5Kl2Zx8Cv0Bn7';

const UUID = '3f6c2a9e-8d41-4b7a-9c2e-5d1f0a7b6e42';
const TIME = '2026-01-15T12:00:00.000Z';

/** Values for fields whose names say more than their types. */
const BY_NAME: Record<string, unknown> = {
  token: `gpr_Ab3dE5gH.${SECRET}`,
  setupCode: `gps_${SECRET}`,
  approvalCode: `gpa_${SECRET}`,
  prefix: 'Ab3dE5gH',
  email: 'owner@example.com',
  currency: 'USD',
  name: 'NVIDIA H100 SXM',
  slug: 'h100sxm',
  category: 'datacenter',
  host: '203.0.113.10',
  user: 'root',
  privateKey: '-----BEGIN OPENSSH PRIVATE KEY-----\n...\n-----END OPENSSH PRIVATE KEY-----\n',
  publicKey: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly gpr-deployment',
  privateKeyFile: 'gpr-3f6c2a9e.key',
  sshCommand: 'ssh -i gpr-3f6c2a9e.key -p 22 root@203.0.113.10',
  gpuModel: 'H100 SXM',
  message: 'A human-readable explanation.',
  requestId: 'req_5b0e7d3c-2a19-4f8e-b6d4-0c9a1e2f3b47',
  apiVersion: 'v1',
  maxConcurrentDeployments: 1,
  activeDeployments: 0,
  netSpentMinor: 0,
  gpuCount: 1,
  port: 22,
  accepted: true,
  received: true,
  frozen: false,
  revokedAt: null,
  failureCode: null,
  failureReason: null,
};

function resolve(schema: Schema, components: Record<string, Schema>): Schema {
  let s = schema;
  for (let i = 0; i < 20 && typeof s.$ref === 'string'; i++) s = components[(s.$ref as string).split('/').pop()!] ?? {};
  return s;
}

function stringFor(s: Schema, name: string | undefined, base: string): string {
  if (s.format === 'date-time' || (name && /At$|Before$/.test(name))) return TIME;
  if (s.format === 'uri' || (name && /Url$/.test(name)))
    return `${base}/${name === 'paymentUrl' ? 'pay' : 'api/v1'}/${UUID}`;
  if (
    s.format === 'uuid' ||
    (name && /(^id|Id)$/.test(name)) ||
    (typeof s.pattern === 'string' && s.pattern.includes('[0-9a-fA-F]{8}'))
  )
    return UUID;
  const min = typeof s.minLength === 'number' ? s.minLength : 0;
  return 'example'.padEnd(min, 'x');
}

function numberFor(s: Schema): number {
  const min = typeof s.minimum === 'number' ? s.minimum : 0;
  const max = typeof s.maximum === 'number' ? s.maximum : Number.MAX_SAFE_INTEGER;
  return Math.min(max, Math.max(min, 500));
}

/** A value that satisfies `schema`, preferring its own example, default or first enum value. */
export function exampleOf(
  schema: Schema,
  components: Record<string, Schema>,
  base: string,
  name?: string,
  depth = 0,
): unknown {
  const s = resolve(schema, components);
  if (s.example !== undefined) return s.example;
  if (
    name &&
    name in BY_NAME &&
    s.type !== 'object' &&
    s.type !== 'array' &&
    !s.enum &&
    (BY_NAME[name] !== null || s.nullable)
  )
    return BY_NAME[name];
  if (s.default !== undefined) return s.default;
  if (Array.isArray(s.enum)) return s.enum.find((v) => v !== null) ?? null;
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = s[key] as Schema[] | undefined;
    if (options?.length) {
      const concrete = options.find(
        (o) =>
          resolve(o, components).type !== 'null' &&
          !(resolve(o, components).enum as unknown[] | undefined)?.includes(null),
      );
      return exampleOf(concrete ?? options[0], components, base, name, depth + 1);
    }
  }
  if (Array.isArray(s.allOf)) {
    return Object.assign({}, ...(s.allOf as Schema[]).map((p) => exampleOf(p, components, base, name, depth + 1)));
  }
  switch (s.type) {
    case 'string':
      return stringFor(s, name, base);
    case 'integer':
    case 'number':
      return numberFor(s);
    case 'boolean':
      return false;
    case 'array':
      return depth > 8 ? [] : [exampleOf((s.items as Schema) ?? {}, components, base, name, depth + 1)];
    default: {
      const out: Record<string, unknown> = {};
      if (depth > 8) return out;
      for (const [key, prop] of Object.entries((s.properties as Record<string, Schema>) ?? {})) {
        out[key] = exampleOf(prop, components, base, key, depth + 1);
      }
      return out;
    }
  }
}
