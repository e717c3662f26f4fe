import { ENV_NAME_PATTERN, RENTAL_STATUSES } from '@gpu-rental/sdk';
import { z } from 'zod';

/** Output shapes: the fields agents rely on, open to fields newer servers add. */
/** An environment variable's name, as the service accepts it. */
const envName = z.string().regex(ENV_NAME_PATTERN, 'upper-case letters, digits and _, not starting with a digit');

/**
 * `machine` of create_rental. The limits are the service's; a setting the chosen offer cannot
 * honour is refused by the service with a message naming it. Values of `env` and the script are
 * secrets: validation messages never repeat them.
 */
export const machineSettings = z
  .strictObject({
    image: z
      .string()
      .min(1)
      .max(512)
      .optional()
      .describe(
        'container image, e.g. "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime"; needs an offer with capabilities.customImage',
      ),
    env: z
      .record(envName, z.string().max(4096))
      .refine((env) => Object.keys(env).length <= 50, 'at most 50 variables')
      .optional()
      .describe(
        'environment of the machine, its startup script and SSH logins, e.g. {"HF_TOKEN": "..."}; values are secrets, sealed and never returned (at most 50, 4,096 bytes each, 32,768 in all)',
      ),
    startupScript: z
      .string()
      .min(1)
      .max(16384)
      .optional()
      .describe(
        'script run once after boot as the SSH user with env set, output in ~/.gpr/startup.log; "#!/bin/bash" first line picks bash; a secret, never returned; needs capabilities.startupScript',
      ),
    ports: z
      .array(z.number().int().min(1).max(65535))
      .max(5)
      .optional()
      .describe(
        "TCP ports to expose over HTTP(S) (not 22); their URLs are the rental's endpoints once ACTIVE; at most the offer's capabilities.ports",
      ),
    diskGb: z.number().int().min(1).optional().describe("disk in GB, at most the offer's capabilities.maxDiskGb"),
  })
  .describe("what runs on the machine; every setting optional. list_offers shows each offer's capabilities");

export const offer = z.looseObject({
  id: z.string(),
  name: z.string(),
  gpuCount: z.number().int(),
  vramGb: z.number().int().nullable(),
  pricePerHourMinor: z.number().int().describe('USD cents per hour for the whole machine'),
  currency: z.string(),
  maximumDurationSeconds: z.number().int(),
  capabilities: z
    .looseObject({
      customImage: z.boolean(),
      startupScript: z.boolean(),
      ports: z.number().int(),
      maxDiskGb: z.number().int().nullable(),
    })
    .optional()
    .describe("what create_rental's machine may set on this offer beyond env (which every offer takes)"),
  trafficPricePerGb: z
    .looseObject({ upMicroUsd: z.number().int(), downMicroUsd: z.number().int() })
    .optional()
    .describe(
      'per-GB price of the internet traffic the machine sends (up) and receives (down), millionths of a USD, charged as used on top of the hourly price; absent: traffic is free',
    ),
});

export const gpuModel = z.looseObject({
  slug: z.string(),
  name: z.string(),
  vramGb: z.number().int().nullable(),
  availableOffers: z.number().int(),
  minPricePerHourMinor: z.number().int(),
  maxPricePerHourMinor: z.number().int(),
  cheapestOfferId: z.string(),
});

export const rental = z.looseObject({
  rentalId: z.string(),
  deploymentId: z.string().nullable(),
  status: z.string().describe('PENDING, PROVISIONING, ACTIVE, TERMINATING, TERMINATED or FAILED'),
  phase: z
    .string()
    .nullable()
    .optional()
    .describe(
      'while PENDING or PROVISIONING: waiting_for_capacity, creating, booting, pulling_image, waiting_for_ssh, checking_gpus or starting',
    ),
  phaseSince: z.string().nullable().optional(),
  endpoints: z
    .array(z.looseObject({ port: z.number().int(), url: z.string() }))
    .optional()
    .describe('once ACTIVE: the URL of each port in machine.ports'),
  endsAt: z
    .string()
    .nullable()
    .optional()
    .describe('once ACTIVE: when the lease (or prepaid time) ends and the machine is terminated'),
  leaseSeconds: z.number().int().nullable().optional(),
  waitForCapacityUntil: z
    .string()
    .nullable()
    .optional()
    .describe('a rental waiting for capacity fails with NO_CAPACITY at this time'),
  machine: z
    .looseObject({
      image: z.string().nullable(),
      envNames: z.array(z.string()).describe('names only: values are never returned'),
      startupScriptSha256: z.string().nullable().describe('the script itself is never returned'),
      ports: z.array(z.number().int()),
      diskGb: z.number().int().nullable(),
    })
    .optional(),
  endedAt: z.string().nullable().describe('verified destruction time, once TERMINATED'),
  billingModel: z.string(),
  quote: z.looseObject({ hourlyPriceMinor: z.number().int(), totalMinor: z.number().int(), currency: z.string() }),
  failureCode: z.string().nullable().optional(),
  failureReason: z.string().nullable().optional(),
  reversalStatus: z.string().nullable().optional(),
});

export const account = z.looseObject({
  user: z.looseObject({ id: z.string() }),
  key: z.looseObject({
    prefix: z.string(),
    scopes: z.array(z.string()),
    maxPerRentalMinor: z.number().int(),
    remainingBudgetMinor: z.number().int(),
    maxConcurrentDeployments: z.number().int(),
    activeDeployments: z.number().int(),
  }),
  balance: z.looseObject({ creditsMinor: z.number().int(), frozen: z.boolean() }),
  billing: z.object({ model: z.string(), budgetRequired: z.boolean() }),
});

export const topup = z.looseObject({
  topupId: z.string(),
  paymentUrl: z.string().nullable().describe('give this link to a human; paying it credits the account'),
  amountMinor: z.number().int(),
  status: z.string(),
  expiresAt: z.string().nullable(),
});

/**
 * SSH access as reveal_ssh_credentials returns it: every field checked, the key in a file. A
 * server without a disk of the caller's (remote) saves no file: `keyFileSaved` is then false and
 * `keyFile` names where `sshCommand` reads the key, which the caller saves there.
 */
export const credentials = z.object({
  deploymentId: z.string(),
  host: z.string(),
  port: z.number().int(),
  user: z.string(),
  keyFile: z.string().describe('path of the private key, saved with mode 0600; pass it to ssh -i'),
  knownHostsFile: z.string().describe('known_hosts file of this deployment alone'),
  keyFileSaved: z
    .boolean()
    .optional()
    .describe(
      'false: this server has no disk of yours and saved nothing; save privateKey to keyFile with mode 0600 before running sshCommand',
    ),
  sshCommand: z.string().describe('ready to run in a shell; append a remote command to run one'),
  privateKey: z
    .string()
    .optional()
    .describe(
      'only with includePrivateKey on a server started with GPR_MCP_ALLOW_SECRETS=1: a secret, never print or log it',
    ),
});

/** A rental or a deployment id; both are accepted. */
export const rentalOrDeploymentId = z.string().min(1).max(100).describe('rental id (or deployment id)');

/** The two names a rental goes by on the HTTP routes; a call gives one of them. */
export const rentalTarget = {
  rentalId: z
    .string()
    .min(1)
    .max(100)
    .optional()
    .describe('the rentalId create_rental returned; give this or deploymentId'),
  deploymentId: z.string().min(1).max(100).optional().describe("the rental's deploymentId; give this or rentalId"),
};

const rentalStatus = z.enum(RENTAL_STATUSES);

/** get_rental's waitFor: the statuses to wait for, as the HTTP waiting read takes them (one status alone is accepted too). */
export const waitFor = z
  .union([z.array(rentalStatus).min(1).max(RENTAL_STATUSES.length), rentalStatus])
  .describe(
    'statuses to wait for, e.g. ["ACTIVE", "FAILED"] while it starts, ["TERMINATED"] after terminate_deployment',
  );

/** One event of the log: what a read showed when it was written. */
export const event = z.looseObject({
  id: z.string().describe('grows with time; pass the last one seen as after'),
  type: z.string(),
  createdAt: z.string(),
  data: z.record(z.string(), z.unknown()),
});
