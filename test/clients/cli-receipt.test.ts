import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SignedReceiptDto } from '../../src/modules/receipts/receipts.dto.js';
import { receiptKeyPair, sampleReceipt } from '../helpers/receipts.js';
import { buildClients, GPR_BIN, run, type Run } from './helpers/build.js';
import { closedPortUrl, payTopup, startService, TEST_GPU, type RunningService } from './helpers/service.js';

/** A key of the service's kind and a receipt it signed, as `gpr receipt get` saves one. */
function signedByNewKey(): { signed: SignedReceiptDto; keys: { keys: unknown[] } } {
  const k = receiptKeyPair();
  const receipt = sampleReceipt(k.id, {
    providerId: 'lambda',
    instanceId: '0920582c7ff041399e34823a0be62549',
    label: 'gpr-0920-1',
    endedAt: '2026-05-01T12:00:00.000Z',
    provider: { state: 'gone', providerState: 'not found', httpStatus: 404, checkedAt: '2026-05-01T11:59:58.000Z' },
    ssh: { outcome: 'refused', checkedAt: '2026-05-01T11:59:59.000Z' },
    charged: { totalMinor: 598, currency: 'USD' },
    issuedAt: '2026-05-01T12:00:00.000Z',
  });
  return {
    signed: { receipt, signature: { alg: 'Ed25519', keyId: k.id, value: k.signer.sign(receipt) } },
    keys: { keys: [k.key] },
  };
}

describe('gpr receipt (built binary)', function () {
  this.timeout(120_000);
  const dir = mkdtempSync(join(tmpdir(), 'gpr-receipt-'));
  const file = (name: string, content: unknown) => {
    const path = join(dir, `${randomUUID()}-${name}`);
    writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
    return path;
  };

  before(() => buildClients());

  describe('verify, offline with --keys', () => {
    /** gpr with no service anywhere: a closed port, so any request would fail loudly. */
    const offline = async (args: string[]) =>
      run(GPR_BIN, args, { HOME: dir, XDG_CONFIG_HOME: dir, GPR_BASE_URL: await closedPortUrl(), GPR_RETRIES: '0' });

    it('says valid and exits 0 for a receipt its key signed, with --json too', async () => {
      const { signed, keys } = signedByNewKey();
      const [receipt, keySet] = [file('receipt.json', signed), file('keys.json', keys)];
      const ok = await offline(['receipt', 'verify', receipt, '--keys', keySet]);
      assert.equal(ok.code, 0, ok.stderr);
      assert.match(
        ok.stdout,
        new RegExp(
          `^Valid: teardown receipt of rental ${signed.receipt.rentalId}: lambda instance ${signed.receipt.instanceId} verified destroyed at 2026-05-01T12:00:00.000Z .*charged \\$5\\.98 USD; signed by ${signed.signature.keyId} of https://gpu.example.com\\.\\n$`,
        ),
      );
      const json = await offline(['--json', 'receipt', 'verify', receipt, '--keys', keySet]);
      assert.equal(json.code, 0, json.stderr);
      assert.deepEqual(JSON.parse(json.stdout), {
        valid: true,
        keyId: signed.signature.keyId,
        receipt: signed.receipt,
      });
      // The whole answer of the receipt route, saved as it came, verifies too.
      const envelope = file('answer.json', { data: signed, meta: { requestId: 'req_1', apiVersion: 'v1' } });
      assert.equal((await offline(['receipt', 'verify', envelope, '--keys', keySet])).code, 0);
    });

    it('exits 8 with one line when one byte changed, the key is unknown, or the file is no receipt', async () => {
      const { signed, keys } = signedByNewKey();
      const keySet = file('keys.json', keys);
      const oneLine = (r: Run, says: RegExp) => {
        assert.equal(r.code, 8, `${r.stdout}${r.stderr}`);
        assert.equal(r.stdout, '');
        assert.match(r.stderr, /^Invalid: [^\n]+\n$/);
        assert.match(r.stderr, says);
      };
      const text = JSON.stringify(signed);
      const tampered = text.replace('"totalMinor":598', '"totalMinor":498');
      assert.notEqual(tampered, text);
      oneLine(await offline(['receipt', 'verify', file('tampered.json', tampered), '--keys', keySet]), /bad signature/);
      const other = signedByNewKey();
      oneLine(
        await offline(['receipt', 'verify', file('receipt.json', signed), '--keys', file('other.json', other.keys)]),
        new RegExp(`unknown key id ${signed.signature.keyId}`),
      );
      oneLine(await offline(['receipt', 'verify', file('junk.json', '{"receipt": '), '--keys', keySet]), /is not JSON/);
      oneLine(await offline(['receipt', 'verify', file('empty.json', {}), '--keys', keySet]), /not a teardown receipt/);
      const json = await offline(['--json', 'receipt', 'verify', file('t.json', tampered), '--keys', keySet]);
      assert.equal(json.code, 8);
      assert.equal(JSON.parse(json.stdout).problem, 'bad_signature');
      // Neither a file nor a rental id: a usage error before anything is read.
      const neither = await offline(['receipt', 'verify', join(dir, 'missing.json'), '--keys', keySet]);
      assert.equal(neither.code, 2, neither.stderr);
    });
  });

  describe('get and verify against the running service', () => {
    let service: RunningService;
    before(async () => {
      service = await startService();
    });
    after(async () => {
      await service?.stop();
    });

    it('a rental ended through gpr: its receipt is printed, saved, and verifies by rental id and from the file', async () => {
      const xdg = mkdtempSync(join(tmpdir(), 'gpr-home-'));
      const gpr = (args: string[], onStderr?: (s: string) => void) =>
        run(GPR_BIN, args, { HOME: xdg, XDG_CONFIG_HOME: xdg, GPR_BASE_URL: service.baseUrl }, onStderr);
      const ok = (r: Run) => {
        assert.equal(r.code, 0, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
        return r;
      };
      ok(await gpr(['--json', 'signup']));
      let paying: Promise<void> | undefined;
      ok(
        await gpr(['--json', 'topup', '20', '--wait', '--timeout', '60'], (chunk) => {
          const link = /(http:\/\/\S+\/pay\/[0-9a-f-]{36})/.exec(chunk);
          if (link && !paying) paying = payTopup(link[1]);
        }),
      );
      await paying;
      const rental = JSON.parse(
        ok(
          await gpr([
            '--json',
            'rent',
            '--gpu',
            TEST_GPU,
            '--max-price',
            '3.00',
            '--budget',
            '5',
            '--wait',
            '--timeout',
            '60',
          ]),
        ).stdout,
      );
      const early = await gpr(['receipt', 'get', rental.rentalId]);
      assert.equal(early.code, 1);
      assert.match(early.stderr, /is ACTIVE: its teardown receipt is issued when it becomes TERMINATED/);
      ok(await gpr(['--json', 'terminate', rental.rentalId, '--wait', '--timeout', '60']));

      const printed = ok(await gpr(['receipt', 'get', rental.rentalId])).stdout;
      const signed = JSON.parse(printed) as SignedReceiptDto;
      assert.equal(signed.receipt.rentalId, rental.rentalId);
      assert.equal(signed.receipt.providerId, 'local');
      const saved = file('receipt.json', printed);
      assert.match(ok(await gpr(['receipt', 'verify', rental.rentalId])).stdout, /^Valid: teardown receipt of rental /);
      assert.match(ok(await gpr(['receipt', 'verify', saved])).stdout, /^Valid: /);
      // Saved keys make it offline; a changed byte of the saved file fails.
      const keys = file(
        'keys.json',
        await (await fetch(`${service.baseUrl}/.well-known/gpr-receipt-keys.json`)).text(),
      );
      assert.equal((await gpr(['receipt', 'verify', saved, '--keys', keys])).code, 0);
      const changed = file(
        'changed.json',
        readFileSync(saved, 'utf8').replace(signed.receipt.instanceId, randomUUID()),
      );
      const bad = await gpr(['receipt', 'verify', changed, '--keys', keys]);
      assert.equal(bad.code, 8);
      assert.match(bad.stderr, /^Invalid: bad signature/);
    });
  });
});
