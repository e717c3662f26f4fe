import type { LocalInventory } from './inventory.js';

/** Built-in inventory used when LOCAL_PROVIDER_INVENTORY is not set: realistic on-demand prices. */
export const defaultInventory: LocalInventory = {
  offers: [
    { key: 'h100-sxm-1x', name: 'NVIDIA H100 SXM', category: 'datacenter', vramGb: 80, gpuCount: 1, cpuCores: 26, memoryGb: 225, storageGb: 512, pricePerHourMinor: 299, maximumDurationSeconds: 7 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
    { key: 'h100-sxm-8x', name: 'NVIDIA H100 SXM', category: 'datacenter', vramGb: 80, gpuCount: 8, cpuCores: 208, memoryGb: 1800, storageGb: 20480, pricePerHourMinor: 2392, maximumDurationSeconds: 7 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
    { key: 'h100-pcie-1x', name: 'NVIDIA H100 PCIe', category: 'datacenter', vramGb: 80, gpuCount: 1, cpuCores: 26, memoryGb: 200, storageGb: 1024, pricePerHourMinor: 249, maximumDurationSeconds: 7 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
    { key: 'a100-80-1x', name: 'NVIDIA A100 80GB', category: 'datacenter', vramGb: 80, gpuCount: 1, cpuCores: 30, memoryGb: 200, storageGb: 512, pricePerHourMinor: 179, maximumDurationSeconds: 7 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
    { key: 'a100-80-4x', name: 'NVIDIA A100 80GB', category: 'datacenter', vramGb: 80, gpuCount: 4, cpuCores: 120, memoryGb: 800, storageGb: 2048, pricePerHourMinor: 716, maximumDurationSeconds: 7 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
    { key: 'a100-40-1x', name: 'NVIDIA A100 40GB', category: 'datacenter', vramGb: 40, gpuCount: 1, cpuCores: 30, memoryGb: 200, storageGb: 512, pricePerHourMinor: 129, maximumDurationSeconds: 7 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
    { key: 'l40s-1x', name: 'NVIDIA L40S', category: 'datacenter', vramGb: 48, gpuCount: 1, cpuCores: 16, memoryGb: 96, storageGb: 512, pricePerHourMinor: 99, maximumDurationSeconds: 3 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
    { key: 'l40s-2x', name: 'NVIDIA L40S', category: 'datacenter', vramGb: 48, gpuCount: 2, cpuCores: 32, memoryGb: 192, storageGb: 1024, pricePerHourMinor: 198, maximumDurationSeconds: 3 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
    { key: 'l4-1x', name: 'NVIDIA L4', category: 'datacenter', vramGb: 24, gpuCount: 1, cpuCores: 8, memoryGb: 32, storageGb: 256, pricePerHourMinor: 48, maximumDurationSeconds: 3 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
    { key: 'rtx-a6000-1x', name: 'NVIDIA RTX A6000', category: 'workstation', vramGb: 48, gpuCount: 1, cpuCores: 14, memoryGb: 100, storageGb: 512, pricePerHourMinor: 79, maximumDurationSeconds: 3 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
    { key: 'rtx-4090-1x', name: 'NVIDIA GeForce RTX 4090', category: 'consumer', vramGb: 24, gpuCount: 1, cpuCores: 16, memoryGb: 64, storageGb: 200, pricePerHourMinor: 44, maximumDurationSeconds: 2 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
    { key: 'rtx-4090-2x', name: 'NVIDIA GeForce RTX 4090', category: 'consumer', vramGb: 24, gpuCount: 2, cpuCores: 32, memoryGb: 128, storageGb: 400, pricePerHourMinor: 88, maximumDurationSeconds: 2 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
    { key: 'rtx-3090-1x', name: 'NVIDIA GeForce RTX 3090', category: 'consumer', vramGb: 24, gpuCount: 1, cpuCores: 8, memoryGb: 32, storageGb: 150, pricePerHourMinor: 25, maximumDurationSeconds: 2 * 86400, available: true, create: 'ok', provisionSeconds: 3 },
  ],
};
