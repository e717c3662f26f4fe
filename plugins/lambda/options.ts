/** Knobs tests turn to keep runs fast; never read from the environment. */
export interface LambdaTuning {
  apiIntervalMs?: number;
  launchIntervalMs?: number;
  timeoutMs?: number;
  backoffMs?: number;
  /** How long one `GET /instances` answers every `get`. Default the API interval. */
  listTtlMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export interface LambdaOptions {
  apiKey: string;
  /** Origin of the API; the plugin appends `/api/v1/...`. */
  apiUrl: string;
  /** The port instances answer SSH on (Lambda: 22). */
  sshPort: number;
  maximumDurationSeconds: number;
  /** Only offer these regions; null offers every region with capacity. */
  regions: string[] | null;
  tuning: LambdaTuning;
}

export const LAMBDA_DEFAULT_URL = 'https://cloud.lambda.ai';
export const LAMBDA_DEFAULT_MAX_DURATION_SECONDS = 7 * 86400;

const PREFIX = 'LAMBDA_PROVIDER_';
const KNOWN = ['API_KEY', 'API_URL', 'SSH_PORT', 'MAX_DURATION_SECONDS', 'REGIONS'];

function positiveInt(raw: string, name: string, max: number): number {
  const v = raw.trim();
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max) throw new Error(`${PREFIX}${name} must be a whole number from 1 to ${max}, got "${raw}"`);
  return Number(v);
}

/** Parses raw `LAMBDA_PROVIDER_<NAME>` values (names without the prefix); errors name the variable. */
export function parseLambdaOptions(raw: Record<string, string>): LambdaOptions {
  for (const k of Object.keys(raw)) {
    if (!KNOWN.includes(k)) throw new Error(`${PREFIX}${k} is not an option of the lambda provider (known: ${KNOWN.map((n) => PREFIX + n).join(', ')})`);
  }
  const apiKey = raw.API_KEY?.trim();
  if (!apiKey) throw new Error(`${PREFIX}API_KEY is required (create one in the Lambda Cloud dashboard under API keys)`);
  if (/\s/.test(apiKey)) throw new Error(`${PREFIX}API_KEY must not contain whitespace`);
  const apiUrl = raw.API_URL?.trim() || LAMBDA_DEFAULT_URL;
  let url: URL;
  try {
    url = new URL(apiUrl);
  } catch {
    throw new Error(`${PREFIX}API_URL must be an http(s) origin such as ${LAMBDA_DEFAULT_URL}, got "${apiUrl}"`);
  }
  if (!['http:', 'https:'].includes(url.protocol) || (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
    throw new Error(`${PREFIX}API_URL must be an http(s) origin without a path such as ${LAMBDA_DEFAULT_URL}, got "${apiUrl}"`);
  }
  let regions: string[] | null = null;
  if (raw.REGIONS !== undefined) {
    regions = raw.REGIONS.split(',').map((r) => r.trim()).filter(Boolean);
    if (regions.length === 0 || regions.some((r) => !/^[a-z]+(-[a-z]+)*-\d+$/.test(r))) {
      throw new Error(`${PREFIX}REGIONS must be a comma-separated list of region codes such as us-east-1, got "${raw.REGIONS}"`);
    }
  }
  return {
    apiKey,
    apiUrl: url.origin,
    sshPort: raw.SSH_PORT === undefined ? 22 : positiveInt(raw.SSH_PORT, 'SSH_PORT', 65535),
    maximumDurationSeconds:
      raw.MAX_DURATION_SECONDS === undefined ? LAMBDA_DEFAULT_MAX_DURATION_SECONDS : positiveInt(raw.MAX_DURATION_SECONDS, 'MAX_DURATION_SECONDS', 366 * 86400),
    regions,
    tuning: {},
  };
}
