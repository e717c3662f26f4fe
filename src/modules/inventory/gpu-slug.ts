const VENDOR_WORDS = new Set(['nvidia', 'geforce', 'tesla', 'quadro', 'amd', 'radeon', 'instinct', 'intel']);

/**
 * One normalization for GPU model names everywhere (offers, /gpus, GPU-intent rentals):
 * vendor words and all spacing/punctuation are dropped, so "NVIDIA H100", "h100", " H100 "
 * and "GeForce RTX-4090" / "rtx4090" meet on the same slug.
 */
export function gpuSlug(name: string): string {
  return name
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w && !VENDOR_WORDS.has(w))
    .join('');
}
