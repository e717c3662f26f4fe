import { fixtureText, type QuirkSetting } from './recorded.js';

/**
 * The RunPod deviations from its REST v2 document that the fake can serve
 * (`test/fixtures/providers/runpod/`, rows R1-R5 of `DIFFERENCES.md`). `behaviour: 'recorded'`
 * turns every one on.
 */
export interface RunpodQuirks {
  [name: string]: QuirkSetting<string | number>;
  /**
   * Cloudflare in front of the API refuses a request whose User-Agent is a runtime's default (or
   * absent) with 403 `text/plain` `error code: 1010` (`edge-403-cloudflare-1010.txt`), before
   * authentication, on every path.
   */
  userAgentGate: QuirkSetting;
  /**
   * `GET /v2/pods` pages by this many (2 for `true`): `pagination.nextCursor`, `?cursor=`, and
   * `?limit=` up to the page size. Not recorded: RunPod announced it (runpod-mcp CHANGELOG, see
   * `SOURCES.md`); the envelope follows that announcement.
   */
  cursorPaging: QuirkSetting<number>;
  /**
   * A create naming an image the registry does not have (`missingImage`) or a malformed reference
   * answers a 400 problem document of its own, not the capacity 400. No such body was recorded
   * (`SOURCES.md`), so its wording is this fake's.
   */
  badImageTag: QuirkSetting;
  /**
   * A GeForce pod (no CUDA forward compatibility) created without `gpu.allowedCudaVersions` or
   * `gpu.minCudaVersion` lands on the oldest host driver; when the image needs a newer CUDA than
   * that host has, its container never starts, so `ssh.direct` never appears (R5; production
   * clients pin CUDA for this reason, `SOURCES.md`).
   */
  cudaMismatch: QuirkSetting;
  /**
   * Pods carry no `ssh` object until the direct endpoint exists and `runtime` is `{}` before the
   * pod runs, as in the earlier v2 document's examples (`list-pods-v2-document-example-2026-08.json`,
   * `create-pod-201-v2-document-example-2026-08.json`).
   */
  podWithoutSsh: QuirkSetting;
}

export const RUNPOD_QUIRKS: readonly (keyof RunpodQuirks & string)[] = [
  'userAgentGate',
  'cursorPaging',
  'badImageTag',
  'cudaMismatch',
  'podWithoutSsh',
];

let edgeBody: string | undefined;

/** Cloudflare's 1010 body, exactly as kept in the fixture. */
export function cloudflare1010Body(): string {
  edgeBody ??= fixtureText('runpod', 'edge-403-cloudflare-1010.txt');
  return edgeBody;
}

/** `major.minor` as numbers, compared part by part so 12.11 is above 12.2 (as the document requires). */
export function compareCuda(a: string, b: string): number {
  const [am, an] = a.split('.').map(Number);
  const [bm, bn] = b.split('.').map(Number);
  return am - bm || an - bn;
}

/** The CUDA version an image is built for, from its tag (`...-cuda12.8.1-...`); null when the tag does not say. */
export function imageCuda(image: string): string | null {
  const m = /cuda-?(\d+)\.(\d+)/i.exec(image.slice(image.lastIndexOf('/') + 1));
  return m ? `${m[1]}.${m[2]}` : null;
}

/**
 * Docker's reference grammar, loosely: lowercase repository path, optional tag of at most 128
 * word characters, dots and dashes, optional digest. Enough to tell a typo from a name.
 */
const IMAGE_REFERENCE =
  /^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;

export function isImageReference(image: string): boolean {
  return IMAGE_REFERENCE.test(image);
}
