import assert from 'node:assert/strict';
import { defaultInventory } from '../../plugins/local/default-inventory.js';
import { GPU_FAMILIES, GPU_MODELS } from '../../src/modules/inventory/gpu-catalog.js';
import { closestGpuSlugs, matchGpuQuery, resolveProviderGpu } from '../../src/modules/inventory/gpu-match.js';

describe('GPU catalog', () => {
  describe(resolveProviderGpu.name, () => {
    const cases: [string, number | null, string, string][] = [
      // RunPod, Vast.ai, Lambda and our own spellings of the same parts
      ['NVIDIA H100 80GB HBM3', 80, 'h100-sxm', 'h100'],
      ['H100 SXM', 80, 'h100-sxm', 'h100'],
      ['H100 SXM5', 80, 'h100-sxm', 'h100'],
      ['gpu_1x_h100_sxm5', 80, 'h100-sxm', 'h100'],
      ['gpu_8x_h100_sxm5', 80, 'h100-sxm', 'h100'],
      ['NVIDIA H100 SXM', 80, 'h100-sxm', 'h100'],
      ['H100 PCIe', 80, 'h100-pcie', 'h100'],
      ['NVIDIA H100 PCIe', 80, 'h100-pcie', 'h100'],
      ['gpu_1x_h100_pcie', 80, 'h100-pcie', 'h100'],
      ['H100 PCIE', 80, 'h100-pcie', 'h100'],
      ['NVIDIA H100 NVL', 94, 'h100-nvl', 'h100'],
      ['NVIDIA GeForce RTX 4090', 24, 'rtx-4090', 'rtx-4090'],
      ['RTX 4090', 24, 'rtx-4090', 'rtx-4090'],
      ['GeForce RTX 4090', null, 'rtx-4090', 'rtx-4090'],
      ['A100 SXM4', 80, 'a100-sxm4-80gb', 'a100'],
      ['A100 SXM4 80GB', null, 'a100-sxm4-80gb', 'a100'],
      ['NVIDIA A100-SXM4-80GB', null, 'a100-sxm4-80gb', 'a100'],
      ['gpu_1x_a100_sxm4', 40, 'a100-sxm4-40gb', 'a100'],
      ['A100 (40 GB SXM4)', null, 'a100-sxm4-40gb', 'a100'],
      ['gpu_8x_a100_80gb_sxm4', null, 'a100-sxm4-80gb', 'a100'],
      ['NVIDIA A100 80GB PCIe', null, 'a100-pcie-80gb', 'a100'],
      ['A100 PCIe', 40, 'a100-pcie-40gb', 'a100'],
      ['A100 PCIE', 80, 'a100-pcie-80gb', 'a100'],
      ['NVIDIA A100 80GB', 80, 'a100-sxm4-80gb', 'a100'],
      ['NVIDIA A100 40GB', 40, 'a100-sxm4-40gb', 'a100'],
      ['NVIDIA H200', 141, 'h200-sxm', 'h200'],
      ['H200 NVL', 141, 'h200-nvl', 'h200'],
      ['NVIDIA L40S', 48, 'l40s', 'l40s'],
      ['L40', 48, 'l40', 'l40'],
      ['NVIDIA L4', 24, 'l4', 'l4'],
      ['gpu_1x_a10', 24, 'a10', 'a10'],
      ['NVIDIA A40', 48, 'a40', 'a40'],
      ['NVIDIA RTX A6000', 48, 'rtx-a6000', 'rtx-a6000'],
      ['RTX A6000', 48, 'rtx-a6000', 'rtx-a6000'],
      ['NVIDIA RTX 6000 Ada Generation', 48, 'rtx-6000-ada', 'rtx-6000-ada'],
      ['RTX 6000Ada', 48, 'rtx-6000-ada', 'rtx-6000-ada'],
      ['gpu_1x_rtx6000', 24, 'quadro-rtx-6000', 'quadro-rtx-6000'],
      ['NVIDIA GeForce RTX 3090', 24, 'rtx-3090', 'rtx-3090'],
      ['RTX 5090', 32, 'rtx-5090', 'rtx-5090'],
      ['Tesla V100-SXM2-16GB', null, 'v100-16gb', 'v100'],
      ['Tesla V100', 32, 'v100-32gb', 'v100'],
      ['NVIDIA B200', 180, 'b200', 'b200'],
      ['gpu_8x_b200_sxm6', 180, 'b200', 'b200'],
      ['AMD Instinct MI300X', 192, 'mi300x', 'mi300x'],
      ['MI300X OAM', 192, 'mi300x', 'mi300x'],
    ];
    for (const [name, vram, slug, family] of cases) {
      it(`"${name}" (${vram ?? '?'} GB) is ${slug} of family ${family}`, () => {
        const g = resolveProviderGpu(name, vram);
        assert.equal(g.slug, slug);
        assert.equal(g.family, family);
        assert.equal(g.known, true);
      });
    }

    it('shows one display name per model whatever the spelling', () => {
      const names = new Set(
        ['NVIDIA H100 80GB HBM3', 'H100 SXM', 'gpu_8x_h100_sxm5'].map((n) => resolveProviderGpu(n, 80).name),
      );
      assert.deepEqual([...names], ['H100 SXM']);
    });

    it('knows every GPU of the built-in local inventory', () => {
      for (const o of defaultInventory.offers) assert.equal(resolveProviderGpu(o.name, o.vramGb).known, true, o.name);
    });

    it('resolves every model by its own slug and its own name', () => {
      for (const g of GPU_MODELS) {
        assert.equal(resolveProviderGpu(g.slug, g.vramGb).slug, g.slug, g.slug);
        assert.equal(resolveProviderGpu(g.name, g.vramGb).slug, g.slug, g.name);
        assert.ok(
          GPU_FAMILIES.some((f) => f.id === g.family),
          `${g.slug} has a listed family`,
        );
      }
      assert.equal(new Set(GPU_MODELS.map((g) => g.slug)).size, GPU_MODELS.length, 'slugs are unique');
    });

    it('keeps a name it does not know under a slug of its own', () => {
      const g = resolveProviderGpu('Acme Tensor X9 (32 GB)', 32);
      assert.deepEqual(g, {
        slug: 'acme-tensor-x9-32gb',
        name: 'Acme Tensor X9 (32 GB)',
        family: 'acme-tensor-x9-32gb',
        category: null,
        vramGb: 32,
        known: false,
      });
    });
  });

  describe(matchGpuQuery.name, () => {
    const H100 = ['h100-sxm', 'h100-pcie', 'h100-nvl'];
    const A100 = ['a100-sxm4-80gb', 'a100-sxm4-40gb', 'a100-pcie-80gb', 'a100-pcie-40gb'];
    const cases: [string, string[], string][] = [
      ['H100', H100, 'h100'],
      ['nvidia h100', H100, 'h100'],
      [' h100 ', H100, 'h100'],
      ['NVIDIA Tesla H100', H100, 'h100'],
      ['4090', ['rtx-4090'], 'rtx-4090'],
      ['rtx4090', ['rtx-4090'], 'rtx-4090'],
      ['GeForce RTX-4090', ['rtx-4090'], 'rtx-4090'],
      ['A100', A100, 'a100'],
      ['H100 SXM', ['h100-sxm'], 'h100-sxm'],
      ['h100-sxm', ['h100-sxm'], 'h100-sxm'],
      ['  nvidia h100-SXM ', ['h100-sxm'], 'h100-sxm'],
      ['h100sxm', ['h100-sxm'], 'h100-sxm'],
      ['A100 80GB', ['a100-sxm4-80gb', 'a100-pcie-80gb'], 'a100-80gb'],
      ['a100 40 gb', ['a100-sxm4-40gb', 'a100-pcie-40gb'], 'a100-40gb'],
      ['A100 SXM4', ['a100-sxm4-80gb', 'a100-sxm4-40gb'], 'a100-sxm4'],
      ['a100-sxm4-40gb', ['a100-sxm4-40gb'], 'a100-sxm4-40gb'],
      ['RTX 6000', ['rtx-6000-ada', 'quadro-rtx-6000'], 'rtx-6000'],
      ['L40S', ['l40s'], 'l40s'],
      ['L40', ['l40'], 'l40'],
    ];
    for (const [query, slugs, key] of cases) {
      it(`"${query}" matches ${slugs.join(', ')}`, () => {
        const m = matchGpuQuery(query);
        assert.equal(m.known, true);
        assert.deepEqual([...m.slugs].sort(), [...slugs].sort());
        assert.equal(m.key, key);
        // What an order stores gives back the same match.
        assert.deepEqual(matchGpuQuery(m.key).slugs, m.slugs);
        assert.equal(matchGpuQuery(m.key).key, m.key);
      });
    }

    it('does not know a model the catalog lacks, nor a stated VRAM that no variant has', () => {
      for (const q of ['TPU v5', 'NVIDIA', 'H100 40GB']) assert.equal(matchGpuQuery(q).known, false, q);
      assert.equal(matchGpuQuery('Acme Tensor X9 32GB').compact, 'acmetensorx932gb');
    });
  });

  describe(closestGpuSlugs.name, () => {
    it('suggests the nearest known slugs and families', () => {
      assert.ok(closestGpuSlugs('H10').includes('h100'));
      assert.ok(closestGpuSlugs('RTX 4900').includes('rtx-4090'));
      assert.ok(closestGpuSlugs('acme x9', ['acme-x9-32gb']).includes('acme-x9-32gb'));
    });
  });
});
