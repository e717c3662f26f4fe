import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CHECK_COMMAND, readCheck } from '../../src/modules/rentals/lifecycle/machine-check.js';

const listing = (n: number) =>
  Array.from({ length: n }, (_, i) => `GPU ${i}: NVIDIA H100 80GB HBM3 (UUID: GPU-${i})`).join('\n');

describe('machine check (ACTIVE means usable)', () => {
  it('is usable when nvidia-smi -L lists every promised GPU and there is no script', () => {
    assert.deepEqual(
      readCheck(`${listing(2)}\n__gpr_smi_exit=0\n__gpr_started=0\n`, { gpus: 2, startupScript: false }),
      { kind: 'usable' },
    );
  });

  it('is a mismatch at once when some GPUs are listed but fewer than promised', () => {
    assert.deepEqual(
      readCheck(`${listing(1)}\n__gpr_smi_exit=0\n__gpr_started=1\n`, { gpus: 4, startupScript: false }),
      { kind: 'gpu_mismatch', listed: 1, promised: 4 },
    );
  });

  it('is not yet while nvidia-smi lists nothing (drivers loading, command failing)', () => {
    const r = readCheck(`__gpr_smi_exit=127\n__gpr_started=0\n`, { gpus: 1, startupScript: false });
    assert.equal(r.kind, 'not_yet');
    assert.equal(r.kind === 'not_yet' && r.phase, 'checking_gpus');
    assert.match(r.kind === 'not_yet' ? r.detail : '', /exit 127/);
  });

  it('waits for the startup script to record its start, after the GPUs', () => {
    const r = readCheck(`${listing(1)}\n__gpr_smi_exit=0\n__gpr_started=0\n`, { gpus: 1, startupScript: true });
    assert.equal(r.kind === 'not_yet' && r.phase, 'starting');
    assert.deepEqual(
      readCheck(`${listing(1)}\n__gpr_smi_exit=0\n__gpr_started=1\n`, { gpus: 1, startupScript: true }),
      { kind: 'usable' },
    );
  });

  it('does not check GPUs of an offer that promises none', () => {
    assert.deepEqual(readCheck(`__gpr_smi_exit=127\n__gpr_started=0\n`, { gpus: 0, startupScript: false }), {
      kind: 'usable',
    });
  });

  it('runs under /bin/sh and reports the listing, the exit status and the marker', () => {
    const home = mkdtempSync(join(tmpdir(), 'gpr-check-'));
    try {
      const bin = join(home, 'bin');
      mkdirSync(bin);
      writeFileSync(join(bin, 'nvidia-smi'), `#!/bin/sh\n[ "$1" = "-L" ] && printf 'GPU 0: A\\nGPU 1: B\\n'\n`, {
        mode: 0o755,
      });
      const env = { PATH: `${bin}:/usr/bin:/bin`, HOME: home };
      const before = execFileSync('/bin/sh', ['-c', CHECK_COMMAND], { env, encoding: 'utf8' });
      assert.equal(readCheck(before, { gpus: 2, startupScript: true }).kind, 'not_yet');
      mkdirSync(join(home, '.gpr'));
      writeFileSync(join(home, '.gpr', 'startup-started'), 'now\n');
      const after = execFileSync('/bin/sh', ['-c', CHECK_COMMAND], { env, encoding: 'utf8' });
      assert.deepEqual(readCheck(after, { gpus: 2, startupScript: true }), { kind: 'usable' });
      assert.match(after, /__gpr_smi_exit=0/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
