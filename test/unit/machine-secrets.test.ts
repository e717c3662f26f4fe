import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import {
  machineColumns,
  machineSettingsOf,
  scriptSha256,
  wrapStartupScript,
} from '../../src/modules/rentals/store/machine-secrets.js';
import { DEFAULT_MACHINE_SETTINGS, STARTUP_MARKER_PATH, type MachineSettings } from '../../src/providers/provider.js';
import { waitFor } from '../helpers/wait.js';

const run = promisify(execFile);

describe('machine secrets', () => {
  const box = new SecretBox(new Map([['k1', randomBytes(32)]]), 'k1');
  const orderId = '0b6c5f7e-2a41-4c1e-9d0b-3f1a2b3c4d5e';
  const settings: MachineSettings = {
    image: 'pytorch/pytorch:2.4.0',
    env: { HF_TOKEN: 'hf_very_secret', A: 'é "quoted" $HOME `x`' },
    startupScript: '#!/bin/bash\necho "$HF_TOKEN" > /dev/null\n',
    ports: [80, 8080],
    diskGb: 200,
  };

  it('round-trips the settings through a SecretBox, the secrets sealed and only the names and hash in the clear', () => {
    const columns = machineColumns(box, orderId, settings);
    assert.equal(columns.machineImage, 'pytorch/pytorch:2.4.0');
    assert.deepEqual(columns.machineEnvNames, ['A', 'HF_TOKEN']);
    assert.deepEqual(columns.machinePorts, [80, 8080]);
    assert.equal(columns.machineDiskGb, 200);
    assert.equal(columns.machineSecretsKid, 'k1');
    assert.equal(columns.startupScriptSha256, scriptSha256(settings.startupScript!));
    const sealed = columns.machineSecretsEnc!;
    assert.ok(!sealed.toString('latin1').includes('hf_very_secret'));
    assert.ok(!sealed.toString('latin1').includes('echo'));
    assert.deepEqual(machineSettingsOf(box, { id: orderId, ...columns }), settings);
  });

  it('fails to open a ciphertext moved to another order', () => {
    const columns = machineColumns(box, orderId, settings);
    assert.throws(() => machineSettingsOf(box, { id: '11111111-2222-4333-8444-555555555555', ...columns }));
  });

  it('seals nothing without a secret, and reads such a row back as it was', () => {
    const plain: MachineSettings = {
      ...DEFAULT_MACHINE_SETTINGS,
      image: 'ubuntu:22.04',
      env: {},
      ports: [8000],
      diskGb: null,
    };
    const columns = machineColumns(box, orderId, plain);
    assert.equal(columns.machineSecretsEnc, null);
    assert.equal(columns.machineSecretsKid, null);
    assert.equal(columns.startupScriptSha256, null);
    assert.equal(columns.machineEnvNames, null);
    assert.deepEqual(machineSettingsOf(box, { id: orderId, ...columns }), plain);

    const none = machineColumns(box, orderId, { ...DEFAULT_MACHINE_SETTINGS, env: {}, ports: [] });
    assert.deepEqual(Object.values(none), [null, null, null, null, null, null, null]);
    assert.deepEqual(machineSettingsOf(box, { id: orderId, ...none }), DEFAULT_MACHINE_SETTINGS);
  });

  it('seals a script without variables, and variables without a script', () => {
    for (const s of [
      { ...settings, env: {} },
      { ...settings, startupScript: null },
    ]) {
      const columns = machineColumns(box, orderId, s);
      assert.ok(columns.machineSecretsEnc);
      assert.deepEqual(machineSettingsOf(box, { id: orderId, ...columns }), s);
    }
  });

  it('hashes the script as SHA-256 of its UTF-8 bytes, in hex', () => {
    assert.equal(
      scriptSha256('echo hi\n'),
      createHash('sha256').update(Buffer.from('echo hi\n', 'utf8')).digest('hex'),
    );
    assert.equal(scriptSha256(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    assert.notEqual(scriptSha256('é'), scriptSha256('e'));
    assert.match(scriptSha256('é'), /^[0-9a-f]{64}$/);
  });

  describe(wrapStartupScript.name, () => {
    let home: string;
    beforeEach(() => {
      home = mkdtempSync(join(tmpdir(), 'gpr-startup-'));
    });
    afterEach(() => rmSync(home, { recursive: true, force: true }));

    /** Runs the wrapped script with /bin/sh as the machine would, and waits for the agent's script to write `done`. */
    async function runWrapped(script: string): Promise<void> {
      const wrapper = join(home, 'wrapper.sh');
      writeFileSync(wrapper, wrapStartupScript(script));
      await run('/bin/sh', [wrapper], {
        env: { HOME: home, PATH: process.env.PATH, GREETING: 'hello from env' },
        timeout: 10_000,
      });
      assert.ok(existsSync(join(home, STARTUP_MARKER_PATH)), 'the marker is written before the script runs');
      assert.match(readFileSync(join(home, STARTUP_MARKER_PATH), 'utf8'), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$/);
      // The agent's script runs in the background: wait for it.
      await waitFor(() => existsSync(join(home, 'done')), {
        timeoutMs: 10_000,
        what: () => `the script to finish; its log: ${readLog()}`,
      });
    }

    const readLog = () =>
      existsSync(join(home, '.gpr/startup.log')) ? readFileSync(join(home, '.gpr/startup.log'), 'utf8') : '(none)';

    const tricky = `it's "quoted" \`not run\` $NOT_EXPANDED \\ 'single' ; | & $(not run either)`;

    it('runs a #!/bin/bash script under bash, its text intact, with the environment, output in the log', async () => {
      const script = [
        '#!/bin/bash',
        // Arrays exist only in bash: sh would fail here.
        'words=(one two)',
        `cat > "$HOME/out" <<'EOF'`,
        tricky,
        'EOF',
        'echo "${words[1]} $GREETING"',
        'touch "$HOME/done"',
        '',
      ].join('\n');
      await runWrapped(script);
      assert.equal(readFileSync(join(home, 'out'), 'utf8'), `${tricky}\n`);
      assert.equal(readLog(), 'two hello from env\n');
      assert.equal(readFileSync(join(home, '.gpr/startup.sh'), 'utf8'), script);
    });

    it('runs a script without an interpreter line under sh', async () => {
      const script = [
        `printf '%s\\n' "$GREETING" > "$HOME/out"`,
        `cat >> "$HOME/out" <<'EOF'`,
        tricky,
        'EOF',
        'echo é',
        'touch "$HOME/done"',
      ].join('\n');
      await runWrapped(script);
      assert.equal(readFileSync(join(home, 'out'), 'utf8'), `hello from env\n${tricky}\n`);
      assert.equal(readLog(), 'é\n');
    });

    it('carries the script only base64-encoded, so nothing in it can break out of the wrapper', () => {
      const wrapped = wrapStartupScript(`'; touch /tmp/pwned; echo '`);
      assert.ok(!wrapped.includes('pwned'));
      assert.match(wrapped, /^#!\/bin\/sh\n/);
    });
  });
});
