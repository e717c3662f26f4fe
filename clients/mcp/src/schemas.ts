import { z } from 'zod';

/** Output shapes: the fields agents rely on, open to fields newer servers add. */
export const offer = z.looseObject({
  id: z.string(),
  name: z.string(),
  gpuCount: z.number().int(),
  vramGb: z.number().int().nullable(),
  pricePerHourMinor: z.number().int().describe('USD cents per hour for the whole machine'),
  currency: z.string(),
  maximumDurationSeconds: z.number().int(),
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

/** SSH access as reveal_ssh_credentials returns it: every field checked, the key in a file. */
export const credentials = z.object({
  deploymentId: z.string(),
  host: z.string(),
  port: z.number().int(),
  user: z.string(),
  keyFile: z.string().describe('path of the private key, saved with mode 0600; pass it to ssh -i'),
  knownHostsFile: z.string().describe('known_hosts file of this deployment alone'),
  sshCommand: z.string().describe('ready to run in a shell; append a remote command to run one'),
  privateKey: z.string().optional().describe('only with includePrivateKey on a server started with GPR_MCP_ALLOW_SECRETS=1: a secret, never print or log it'),
});

/** A rental or a deployment id; both are accepted. */
export const rentalOrDeploymentId = z.string().min(1).max(100).describe('rental id (or deployment id)');
