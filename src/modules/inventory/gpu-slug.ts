import { matchGpuQuery } from './gpu-match.js';

/**
 * Compact form of a GPU name, for where only the equality of two spellings matters (the
 * idempotency of GPU-intent rentals): "NVIDIA H100", "h100", " H100 " and "GeForce RTX-4090" /
 * "rtx4090" meet. Which offers a name means is the catalog's business (`matchGpuQuery`).
 */
export function gpuSlug(name: string): string {
  return matchGpuQuery(name).compact;
}
