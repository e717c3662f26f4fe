/**
 * What a rental's machine is and may carry: GPU names, what ACTIVE means, the machine settings,
 * the lease, the wait for capacity and the phases, and the next step after a refusal naming one.
 */
import { formatDuration } from './durations.js';
import {
  limitText,
  MAX_ENV_TOTAL_BYTES,
  MAX_ENV_VALUE_BYTES,
  MAX_ENV_VARIABLES,
  MAX_EXPOSED_PORTS,
  MAX_STARTUP_SCRIPT_BYTES,
  MAX_WAIT_FOR_CAPACITY_SECONDS,
  MIN_LEASE_SECONDS,
  MIN_WAIT_FOR_CAPACITY_SECONDS,
} from './limits.js';

/** What a GPU name selects, for `/llms.txt`, the OpenAPI description and the skill. */
export const GPU_FAMILY_INTENT =
  'gpuModel names a family or a model: "H100" is the cheapest offer of any H100 (PCIe, SXM, NVL), "A100" the cheapest A100 (which may be 40 GB); ' +
  'name the model ("A100 80GB", "H100 SXM") to get exactly that one. The rental answers with gpuName and matchedBy, saying which it chose.';

/** The count belongs in gpuCount; a count written into the name must agree with it. */
export const GPU_COUNT_IN_NAME =
  'Put the number of GPUs in gpuCount, not in gpuModel; a count written in the name ("2x H100") is accepted only when gpuCount is the same.';

/** What ACTIVE promises, for `/llms.txt`, the skill and the clients. */
export const ACTIVE_MEANS =
  "ACTIVE means usable: SSH with the rental's own key gets in, `nvidia-smi -L` lists as many GPUs as the offer promised, " +
  'and the startup script, if any, has started (it may still be running).';

/** A rental's `machine`, in two sentences. */
export const MACHINE_SETTINGS_RULE =
  "A rental may carry `machine`: `image` (a container image; needs the offer's `capabilities.customImage`), " +
  `\`env\` (up to ${MAX_ENV_VARIABLES} variables named like \`HF_TOKEN\`, set for the machine's processes, the startup script and SSH logins, on every offer), ` +
  `\`startupScript\` (up to ${limitText(MAX_STARTUP_SCRIPT_BYTES)} bytes, run once after boot as the SSH user, output in \`~/.gpr/startup.log\`; needs \`capabilities.startupScript\`), ` +
  `\`ports\` (up to ${MAX_EXPOSED_PORTS} TCP ports served over HTTP(S), no more than \`capabilities.ports\`; their URLs are the rental's \`endpoints\` once ACTIVE) ` +
  'and `diskGb` (up to `capabilities.maxDiskGb`; null there: the disk cannot be chosen). ' +
  'Variable values and the script are secrets: sealed at rest, never logged, never returned (reads show only `envNames` and `startupScriptSha256`).';

/** A lease (`terminateAfterSeconds`) and the key's `maxRentalSeconds`. */
export const LEASE_RULE =
  `\`terminateAfterSeconds\` is a lease: the rental is terminated (reason EXPIRED) that many seconds after it becomes ACTIVE, on any billing model, from ${MIN_LEASE_SECONDS} up to the offer's \`maximumDurationSeconds\`. ` +
  "A key's `maxRentalSeconds` (GET /api/v1/me) caps it: a longer lease is refused with 422, never shortened, and without one the key's maximum is the lease. " +
  'The rental shows `leaseSeconds`, and `endsAt` once ACTIVE.';

/** Waiting for capacity (`waitForCapacitySeconds`). */
export const WAIT_FOR_CAPACITY_RULE =
  `\`waitForCapacitySeconds\` (${MIN_WAIT_FOR_CAPACITY_SECONDS} to ${limitText(MAX_WAIT_FOR_CAPACITY_SECONDS)}; GPU intent only, on a balance account) keeps a rental PENDING in phase \`waiting_for_capacity\` when no eligible offer is on sale, ` +
  'and starts it as soon as one appears; at `waitForCapacityUntil` it fails with NO_CAPACITY and nothing is charged.';

/** The next step after NO_MATCHING_OFFER for a known model that is not on sale as asked: wait for it. */
export const WAIT_FOR_CAPACITY_NEXT =
  `To wait for one instead, send the same request with waitForCapacitySeconds (${MIN_WAIT_FOR_CAPACITY_SECONDS} to ${limitText(MAX_WAIT_FOR_CAPACITY_SECONDS)}, on a balance account): ` +
  'it stays PENDING in phase waiting_for_capacity and starts as soon as an eligible offer appears.';

/** The phases a starting rental shows. */
export const PHASES_RULE =
  'While PENDING or PROVISIONING, `phase` (since `phaseSince`) says where it stands: `waiting_for_capacity`, `creating`, `booting` or `pulling_image`, ' +
  '`waiting_for_ssh`, `checking_gpus`, `starting` (the startup script has not started yet). ' +
  'A machine with fewer GPUs than promised is destroyed and the next candidate tried; with none left the rental fails with GPU_MISMATCH.';

/** How a client names a rental's settings, and where it shows offers' capabilities and the key's limits. */
export interface RentalSettingNames {
  image: string;
  env: string;
  startupScript: string;
  ports: string;
  diskGb: string;
  lease: string;
  waitForCapacity: string;
  /** Where offers' `capabilities` are shown, e.g. "see `gpr offers`". */
  offers: string;
  /** Where the key's `maxRentalSeconds` is shown, e.g. "see `gpr whoami`". */
  account: string;
}

/**
 * The next step after a refusal (422) whose message names a machine setting, the lease or the
 * wait for capacity; undefined for any other. The service's message says what is wrong; this says
 * where to look and what to change, in the client's own words.
 */
export function rentalSettingNext(message: string, n: RentalSettingNames): string | undefined {
  switch (/\bmachine\.(image|env|startupScript|ports|diskGb)\b/.exec(message)?.[1]) {
    case 'image':
      return `Give ${n.image} as registry/path:tag, an image the service allows, on an offer whose capabilities.customImage is true (${n.offers}); or leave it out for the provider's default image.`;
    case 'env':
      return `Variables (${n.env}) are named with upper-case letters, digits and _, not starting with a digit; at most ${MAX_ENV_VARIABLES}, each value up to ${limitText(MAX_ENV_VALUE_BYTES)} bytes, ${limitText(MAX_ENV_TOTAL_BYTES)} bytes in all. Put larger data in a file the startup script fetches.`;
    case 'startupScript':
      return `The startup script (${n.startupScript}) is at most ${limitText(MAX_STARTUP_SCRIPT_BYTES)} bytes and needs an offer whose capabilities.startupScript is true (${n.offers}); or run it over SSH once the rental is ACTIVE.`;
    case 'ports':
      return `Expose at most ${MAX_EXPOSED_PORTS} ports (${n.ports}), each once and not 22, on an offer whose capabilities.ports is at least that many (${n.offers}); or reach them through an SSH tunnel.`;
    case 'diskGb':
      return `Ask for at most the offer's capabilities.maxDiskGb with ${n.diskGb} (${n.offers}; null there: the disk cannot be chosen), or leave it out for the default disk.`;
  }
  if (/\bterminateAfterSeconds\b/.test(message)) {
    return /\bkey\b|maxRentalSeconds/.test(message)
      ? `This key's maxRentalSeconds (${n.account}) caps every lease: give ${n.lease} of at most that, or leave it out and the key's maximum is the lease. Only the key's owner can raise it.`
      : `${n.lease} is at least ${MIN_LEASE_SECONDS} s and at most the offer's maximumDurationSeconds (${n.offers}).`;
  }
  if (/\bwaitForCapacitySeconds\b/.test(message)) {
    return `${n.waitForCapacity} is 60 s to 24 h, on a rental by GPU model (an exact offer cannot wait) of a balance account.`;
  }
  return undefined;
}

/**
 * {@link rentalSettingNext} for the refusals that can name a setting: 422 VALIDATION_FAILED, and
 * NO_MATCHING_OFFER when no offer of the model and price can honour the settings it names; and a
 * rental body over its size limit (413), which names the script and the variables.
 */
export function rentalRefusalNext(code: string, message: string, n: RentalSettingNames): string | undefined {
  if (code === 'PAYLOAD_TOO_LARGE' && /\bmachine\./.test(message)) {
    return (
      `The startup script (${n.startupScript}) is at most ${limitText(MAX_STARTUP_SCRIPT_BYTES)} bytes and the variables (${n.env}) at most ${MAX_ENV_VARIABLES} ` +
      `of ${limitText(MAX_ENV_VALUE_BYTES)} bytes, ${limitText(MAX_ENV_TOTAL_BYTES)} bytes in all: shorten the one over its limit, or put larger data in a file the startup script fetches.`
    );
  }
  return code === 'VALIDATION_FAILED' || code === 'NO_MATCHING_OFFER' ? rentalSettingNext(message, n) : undefined;
}

/** The line under a new rental with a lease: when it ends, and who set the lease (`flag`: the client's lease argument). */
export function leaseLine(leaseSeconds: number, askedFor: boolean, flag: string): string {
  const why = askedFor ? 'the lease you asked for' : `this key's maxRentalSeconds; ${flag} sets a shorter lease`;
  return `Terminated ${formatDuration(leaseSeconds)} after it becomes ACTIVE (${why}); endsAt shows when.`;
}

/** The line under a rental waiting for capacity until `until`. */
export function capacityLine(until: string): string {
  return `Waits for capacity until ${until}: it starts as soon as an eligible offer appears, else it fails with NO_CAPACITY and nothing is charged.`;
}
