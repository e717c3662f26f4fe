import assert from 'node:assert/strict';
import { gpuSlug } from '../../src/modules/inventory/gpu-slug.js';

describe('public inventory', () => {
  it('normalizes GPU names to one slug', () => {
    for (const n of ['NVIDIA H100', 'h100', ' H100 ', 'nvidia-h100']) assert.equal(gpuSlug(n), 'h100');
    assert.equal(gpuSlug('NVIDIA GeForce RTX 4090'), gpuSlug('rtx4090'));
    assert.equal(gpuSlug('RTX-4090'), 'rtx4090');
    assert.notEqual(gpuSlug('A100 80GB'), gpuSlug('A100 40GB'));
  });
});
