import { declareOptions, parseOptions } from '../../src/providers/kit/options.js';

/** Knobs tests turn to keep runs fast; never read from the environment. */
export interface LambdaTuning {
  apiIntervalMs?: number;
  launchIntervalMs?: number;
  timeoutMs?: number;
  backoffMs?: number;
  /** How long one `GET /instances` answers every `get`. Default the API interval. */
  listTtlMs?: number;
  /** How long an instance may report statuses the state table does not know before it counts as failed. */
  unknownStateBoundMs?: number;
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

/** The `LAMBDA_PROVIDER_*` options. */
export const LAMBDA_OPTIONS = declareOptions({
  providerId: 'lambda',
  options: {
    API_KEY: {
      kind: 'string',
      required: true,
      secret: true,
      noSpaces: true,
      hint: 'create one in the Lambda Cloud dashboard under API keys',
    },
    API_URL: { kind: 'origin', default: LAMBDA_DEFAULT_URL, appends: '/api/v1/...' },
    SSH_PORT: { kind: 'integer', min: 1, max: 65_535, default: 22 },
    MAX_DURATION_SECONDS: { kind: 'integer', min: 1, max: 366 * 86400, default: LAMBDA_DEFAULT_MAX_DURATION_SECONDS },
    REGIONS: { kind: 'list', item: /^[a-z]+(-[a-z]+)*-\d+$/, itemHelp: 'region codes such as us-east-1' },
  },
});

/** Parses raw `LAMBDA_PROVIDER_<NAME>` values (names without the prefix); errors name the variable. */
export function parseLambdaOptions(raw: Record<string, string>): LambdaOptions {
  const o = parseOptions(LAMBDA_OPTIONS, raw);
  return {
    apiKey: o.API_KEY,
    apiUrl: o.API_URL,
    sshPort: o.SSH_PORT,
    maximumDurationSeconds: o.MAX_DURATION_SECONDS,
    regions: o.REGIONS,
    tuning: {},
  };
}
