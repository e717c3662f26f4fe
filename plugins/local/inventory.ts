import { readFile } from 'node:fs/promises';
import type { MachineCapabilities, TrafficPrice } from '../../src/providers/provider.js';

/** How the simulated provider answers a create call for an offer. */
export type CreateMode = 'ok' | 'unavailable' | 'ambiguous-created' | 'ambiguous-none' | 'fail';
export const CREATE_MODES: CreateMode[] = ['ok', 'unavailable', 'ambiguous-created', 'ambiguous-none', 'fail'];

/**
 * How the simulated provider answers a destroy call for an instance of an offer, read from the
 * inventory at destroy time so a test can make destruction misbehave and later recover.
 * - `ok`: the instance is destroyed: SSH server closed, sandbox removed, `get` reports `gone`.
 * - `ignore`: destroy reports success but nothing happens; `get` keeps reporting the instance.
 * - `ghost`: destroy reports success and the API forgets the instance (`get` says `gone`), but
 *   its SSH server keeps answering until a later destroy under `ok` or `close()`: the case the
 *   host's SSH probe exists to catch.
 */
export type DestroyMode = 'ok' | 'ignore' | 'ghost';
export const DESTROY_MODES: DestroyMode[] = ['ok', 'ignore', 'ghost'];

export interface LocalInventoryOffer {
  key: string;
  name: string;
  category: string;
  vramGb: number | null;
  gpuCount: number;
  cpuCores?: number | null;
  memoryGb?: number | null;
  storageGb?: number | null;
  pricePerHourMinor: number;
  maximumDurationSeconds: number;
  /** False hides the offer from listings (as if sold out). Default true. */
  available?: boolean;
  /** Default `ok`. */
  create?: CreateMode;
  /** Seconds from create to running. Default 3. */
  provisionSeconds?: number;
  /** Default `ok`. */
  destroy?: DestroyMode;
  /**
   * What the offer's machines can be given (the offer's `capabilities`); each field left out is
   * what the local provider honours (see {@link LOCAL_CAPABILITIES}).
   */
  capabilities?: Partial<MachineCapabilities>;
  /** GPUs its machines really have, which `nvidia-smi` lists; default `gpuCount`. Fewer than promised simulates a short machine. */
  actualGpuCount?: number;
  /** Per-GB traffic prices the offer bills (the offer's `trafficPrice`); default: traffic is free. */
  trafficPrice?: TrafficPrice;
}

/**
 * What a local machine honours unless its offer's `capabilities` say less: any image (recorded,
 * not pulled), a startup script, five ports, and a disk up to the offer's `storageGb` (else 200 GB).
 */
export const LOCAL_CAPABILITIES = Object.freeze({ customImage: true, startupScript: true, ports: 5, maxDiskGb: 200 });

/** The capabilities an inventory offer declares, its own over {@link LOCAL_CAPABILITIES}. */
export function offerCapabilities(o: LocalInventoryOffer): MachineCapabilities {
  return { ...LOCAL_CAPABILITIES, maxDiskGb: o.storageGb || LOCAL_CAPABILITIES.maxDiskGb, ...o.capabilities };
}

const CAPABILITY_FIELDS = ['customImage', 'startupScript', 'ports', 'maxDiskGb'];

export interface LocalInventory {
  offers: LocalInventoryOffer[];
}

function fail(where: string, msg: string): never {
  throw new Error(`local inventory ${where}: ${msg}`);
}

const posInt = (v: unknown) => Number.isSafeInteger(v) && (v as number) > 0;
const optInt = (v: unknown) => v === undefined || v === null || (Number.isSafeInteger(v) && (v as number) >= 0);

/** Validates an inventory document; errors name the offer index and field. */
export function parseInventory(doc: unknown, source: string): LocalInventory {
  if (!doc || typeof doc !== 'object' || !Array.isArray((doc as LocalInventory).offers)) {
    fail(source, 'must be an object with an "offers" array');
  }
  const keys = new Set<string>();
  const offers = (doc as LocalInventory).offers.map((o, i) => {
    const at = `${source} offers[${i}]`;
    if (!o || typeof o !== 'object') fail(at, 'must be an object');
    if (typeof o.key !== 'string' || !/^[A-Za-z0-9._:-]{1,100}$/.test(o.key))
      fail(at, '"key" must be 1-100 characters of letters, digits, . _ : -');
    if (keys.has(o.key)) fail(at, `duplicate key "${o.key}"`);
    keys.add(o.key);
    if (typeof o.name !== 'string' || o.name.trim() === '' || o.name.length > 100)
      fail(at, '"name" must be a non-empty string of at most 100 characters');
    if (typeof o.category !== 'string' || o.category.trim() === '' || o.category.length > 64)
      fail(at, '"category" must be a non-empty string');
    if (!(o.vramGb === null || posInt(o.vramGb))) fail(at, '"vramGb" must be a positive integer or null');
    if (!posInt(o.gpuCount)) fail(at, '"gpuCount" must be a positive integer');
    for (const f of ['cpuCores', 'memoryGb', 'storageGb'] as const)
      if (!optInt(o[f])) fail(at, `"${f}" must be a non-negative integer`);
    if (!posInt(o.pricePerHourMinor)) fail(at, '"pricePerHourMinor" must be a positive integer (cents)');
    if (!posInt(o.maximumDurationSeconds)) fail(at, '"maximumDurationSeconds" must be a positive integer');
    if (o.available !== undefined && typeof o.available !== 'boolean') fail(at, '"available" must be true or false');
    if (o.create !== undefined && !CREATE_MODES.includes(o.create))
      fail(at, `"create" must be one of ${CREATE_MODES.join(', ')}`);
    if (o.provisionSeconds !== undefined && !(Number.isFinite(o.provisionSeconds) && o.provisionSeconds >= 0)) {
      fail(at, '"provisionSeconds" must be a number >= 0');
    }
    if (o.destroy !== undefined && !DESTROY_MODES.includes(o.destroy))
      fail(at, `"destroy" must be one of ${DESTROY_MODES.join(', ')}`);
    if (o.capabilities !== undefined) checkCapabilities(`${at} capabilities`, o.capabilities);
    if (o.actualGpuCount !== undefined && !optInt(o.actualGpuCount))
      fail(at, '"actualGpuCount" must be a non-negative integer');
    return {
      ...o,
      available: o.available ?? true,
      create: o.create ?? 'ok',
      provisionSeconds: o.provisionSeconds ?? 3,
      destroy: o.destroy ?? 'ok',
    };
  });
  return { offers };
}

function checkCapabilities(at: string, c: unknown): void {
  if (!c || typeof c !== 'object' || Array.isArray(c)) fail(at, 'must be an object');
  const caps = c as Record<string, unknown>;
  for (const k of Object.keys(caps))
    if (!CAPABILITY_FIELDS.includes(k)) fail(at, `unknown field "${k}" (known: ${CAPABILITY_FIELDS.join(', ')})`);
  for (const k of ['customImage', 'startupScript'])
    if (caps[k] !== undefined && typeof caps[k] !== 'boolean') fail(at, `"${k}" must be true or false`);
  if (caps.ports !== undefined && !(Number.isSafeInteger(caps.ports) && (caps.ports as number) >= 0))
    fail(at, '"ports" must be a non-negative integer');
  if (caps.maxDiskGb !== undefined && caps.maxDiskGb !== null && !posInt(caps.maxDiskGb))
    fail(at, '"maxDiskGb" must be a positive integer or null');
}

export async function readInventoryFile(path: string): Promise<LocalInventory> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    fail(path, `cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    fail(path, `is not valid JSON (${(err as Error).message})`);
  }
  return parseInventory(doc, path);
}
