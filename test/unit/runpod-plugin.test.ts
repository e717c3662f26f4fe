import assert from 'node:assert/strict';
import { ERROR_TABLE } from '../../plugins/runpod/errors.js';
import runpodPlugin from '../../plugins/runpod/index.js';
import { cudaConstraintFor, imageCudaVersion, RUNPOD_DEFAULTS } from '../../plugins/runpod/options.js';
import { podState } from '../../plugins/runpod/states.js';

describe('RunPod options', () => {
  it('validates at start, naming the variable', () => {
    assert.throws(() => runpodPlugin.validateOptions({}), /RUNPOD_PROVIDER_API_KEY is required/);
    assert.throws(
      () => runpodPlugin.validateOptions({ API_KEY: 'k', APIKEY: 'x' }),
      /RUNPOD_PROVIDER_APIKEY is not an option/,
    );
    assert.throws(
      () => runpodPlugin.validateOptions({ API_KEY: 'k', CLOUD: 'moon' }),
      /RUNPOD_PROVIDER_CLOUD must be SECURE or COMMUNITY/,
    );
    assert.throws(() => runpodPlugin.validateOptions({ API_KEY: 'k', DISK_GB: '0' }), /RUNPOD_PROVIDER_DISK_GB/);
    assert.throws(
      () => runpodPlugin.validateOptions({ API_KEY: 'k', MAX_DURATION_SECONDS: '1.5' }),
      /RUNPOD_PROVIDER_MAX_DURATION_SECONDS/,
    );
    assert.throws(
      () => runpodPlugin.validateOptions({ API_KEY: 'k', API_URL: 'https://rest.runpod.io/v1' }),
      /RUNPOD_PROVIDER_API_URL must be an http\(s\) origin without a path .*appends \/v2\/\.\.\./,
    );
    assert.throws(
      () => runpodPlugin.validateOptions({ API_KEY: 'k', API_URL: 'not a url' }),
      /RUNPOD_PROVIDER_API_URL/,
    );
    assert.deepEqual(runpodPlugin.validateOptions({ API_KEY: ' k ' }), {
      apiKey: 'k',
      ...RUNPOD_DEFAULTS,
      diskGb: 50,
      cuda: { minCudaVersion: '12.4' },
      cudaFromSetting: false,
    });
    assert.throws(
      () => runpodPlugin.validateOptions({ API_KEY: 'k', DISK_GB: '100', MAX_DISK_GB: '80' }),
      /RUNPOD_PROVIDER_MAX_DISK_GB \(80\) is below RUNPOD_PROVIDER_DISK_GB \(100\)/,
    );
    // Unset, the ceiling rises to the default disk.
    assert.equal(runpodPlugin.validateOptions({ API_KEY: 'k', DISK_GB: '800' }).maxDiskGb, 800);
    assert.equal(runpodPlugin.validateOptions({ API_KEY: 'k', CUDA_VERSIONS: '12.8' }).cudaFromSetting, true);
    assert.equal(
      runpodPlugin.validateOptions({ API_KEY: 'k', API_URL: 'http://127.0.0.1:9/' }).apiUrl,
      'http://127.0.0.1:9',
    );
  });
});

describe('RunPod CUDA on the host', () => {
  it('reads the CUDA version from the image tag, and RUNPOD_PROVIDER_CUDA_VERSIONS overrides it', () => {
    assert.equal(imageCudaVersion('runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04'), '12.4');
    assert.equal(imageCudaVersion('nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04'), null);
    assert.equal(imageCudaVersion('runpod/base:0.6.2-cuda-12.6.2'), '12.6');
    assert.equal(
      imageCudaVersion('registry.example:5000/cuda11/img:latest'),
      null,
      'only the tag counts, not the path',
    );
    assert.deepEqual(cudaConstraintFor(null, 'runpod/pytorch:2.8.0-py3.11-cuda12.8.1'), { minCudaVersion: '12.8' });
    assert.equal(cudaConstraintFor(null, 'ubuntu:22.04'), null);
    assert.deepEqual(cudaConstraintFor(['12.8', '12.6', '12.8'], 'x-cuda12.4.1'), {
      allowedCudaVersions: ['12.8', '12.6'],
    });
    assert.deepEqual(cudaConstraintFor(['12.6+'], 'x'), { minCudaVersion: '12.6' });
    assert.equal(cudaConstraintFor(['ANY'], 'x-cuda12.4.1'), null);
    const parse = (v: string) => runpodPlugin.validateOptions({ API_KEY: 'k', CUDA_VERSIONS: v });
    assert.deepEqual(parse('12.4,12.8').cuda, { allowedCudaVersions: ['12.4', '12.8'] });
    assert.deepEqual(
      runpodPlugin.validateOptions({ API_KEY: 'k' }).cuda,
      { minCudaVersion: '12.4' },
      'the default image names 12.4',
    );
    for (const bad of ['12', '12.4,12.8+', 'any,12.4', 'cuda12.4'])
      assert.throws(() => parse(bad), /RUNPOD_PROVIDER_CUDA_VERSIONS/, bad);
  });
});

describe('RunPod states', () => {
  it('reads a status it does not know yet as pending, never as running or gone', () => {
    assert.equal(podState('HIBERNATING'), 'pending');
  });
});

describe('RunPod error table', () => {
  it('covers every documented status', () => {
    const statuses = ERROR_TABLE.map((r) => r.match.status);
    for (const s of [400, 401, 402, 403, 404, 422, 429, '5xx', '4xx'])
      assert.ok(statuses.includes(s as never), `rule for ${s}`);
  });
});
