import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ssh2 from 'ssh2';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';

describe(generateDeploymentKeyPair.name, () => {
  it('makes an ed25519 pair in OpenSSH formats, fresh each time', () => {
    const a = generateDeploymentKeyPair('gpu-rental-d1');
    const b = generateDeploymentKeyPair('gpu-rental-d1');
    assert.match(a.publicKey, /^ssh-ed25519 AAAAC3NzaC1lZDI1NTE5[0-9A-Za-z+/=]+ gpu-rental-d1$/);
    assert.match(a.privateKey, /^-----BEGIN OPENSSH PRIVATE KEY-----\n[\s\S]+\n-----END OPENSSH PRIVATE KEY-----\n$/);
    assert.notEqual(a.publicKey, b.publicKey);
    const priv = ssh2.utils.parseKey(a.privateKey);
    const pub = ssh2.utils.parseKey(a.publicKey);
    assert.ok(!(priv instanceof Error) && !(pub instanceof Error));
    const data = Buffer.from('challenge');
    assert.equal(pub.verify(data, priv.sign(data)), true);
  });

  it('is accepted by the OpenSSH tools', async () => {
    const { publicKey, privateKey } = generateDeploymentKeyPair('cli-check');
    const dir = await mkdtemp(join(tmpdir(), 'ssh-keys-test-'));
    try {
      const file = join(dir, 'id_ed25519');
      await writeFile(file, privateKey, { mode: 0o600 });
      const { stdout } = await promisify(execFile)('ssh-keygen', ['-y', '-f', file]);
      assert.equal(stdout.trim().split(' ').slice(0, 2).join(' '), publicKey.split(' ').slice(0, 2).join(' '));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps the comment to one safe token', () => {
    assert.throws(() => generateDeploymentKeyPair('two words'), /comment/);
    assert.throws(() => generateDeploymentKeyPair('line\nbreak'), /comment/);
  });
});
