import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/config.js';
import { AppError } from '../../src/errors/app-error.js';
import {
  DEFAULT_MACHINE_SETTINGS,
  NO_MACHINE_CAPABILITIES,
  type MachineCapabilities,
  type MachineSettings,
} from '../../src/providers/provider.js';
import {
  leaseSeconds,
  machineIntentValue,
  offerLabel,
  parseMachineSettings,
  unmetSetting,
  type MachinePolicy,
} from '../../src/modules/rentals/admission/machine-settings.js';
import type { MachineSettingsRequest } from '../../src/modules/rentals/wire/machine-settings.dto.js';
import { honoursNeeds, needsOf } from '../../src/modules/inventory/offer-candidates.js';

const ANY: MachinePolicy = { imageAllowlist: [], maxDiskGb: 1000 };

/** Asserts `fn` refuses with 422 VALIDATION_FAILED and a message matching each of `patterns`. */
function refuses(fn: () => unknown, ...patterns: RegExp[]): string {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof AppError, `expected an AppError, got ${String(caught)}`);
  assert.equal(caught.code, 'VALIDATION_FAILED');
  assert.equal(caught.status, 422);
  assert.match(caught.message, /^Invalid request: /);
  for (const p of patterns) assert.match(caught.message, p);
  return caught.message;
}

// Names, types and the schema's bounds are refused before these run (body-shape.ts and the
// validator: test/unit/body-shape.test.ts and the validation tests of test/api/rentals-admission.test.ts).
function parse(req: unknown, policy: MachinePolicy = ANY): MachineSettings {
  return parseMachineSettings(req as MachineSettingsRequest, policy);
}

describe('machine settings', () => {
  describe(parseMachineSettings.name, () => {
    it('gives a fresh copy of the defaults when nothing is asked', () => {
      const a = parse(undefined);
      assert.deepEqual(a, DEFAULT_MACHINE_SETTINGS);
      a.env.X = '1';
      a.ports.push(80);
      assert.deepEqual(parse(undefined), DEFAULT_MACHINE_SETTINGS);
      assert.deepEqual(parse({}), DEFAULT_MACHINE_SETTINGS);
    });

    it('takes every setting within its limits', () => {
      const s = parse({
        image: 'ghcr.io/acme/trainer:v1.2',
        env: { HF_TOKEN: 'hf_x', _A1: '' },
        startupScript: 'echo hi',
        ports: [8080, 80],
        diskGb: 200,
      });
      assert.deepEqual(s, {
        image: 'ghcr.io/acme/trainer:v1.2',
        env: { HF_TOKEN: 'hf_x', _A1: '' },
        startupScript: 'echo hi',
        ports: [80, 8080],
        diskGb: 200,
      });
    });

    describe('image', () => {
      for (const ok of [
        'ubuntu',
        'ubuntu:22.04',
        'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
        'nvcr.io/nvidia/pytorch:24.05-py3',
        'localhost:5000/team/my_image__x:latest',
        `alpine@sha256:${'a'.repeat(64)}`,
        `registry.example.com/a/b:tag@sha256:${'0f'.repeat(32)}`,
      ]) {
        it(`takes ${ok.slice(0, 50)}`, () => assert.equal(parse({ image: ok }).image, ok));
      }

      for (const bad of [
        '',
        ' ubuntu',
        'ubuntu latest',
        'Ubuntu',
        'ubuntu;rm -rf /',
        'ubuntu:$(id)',
        'a/`id`',
        'ubuntu:',
        ':tag',
        'ubuntu@sha256:abc',
        'a//b',
        `x:${'t'.repeat(129)}`,
        `${'a'.repeat(256)}`,
      ]) {
        it(`refuses ${JSON.stringify(bad.slice(0, 40))}`, () => {
          refuses(
            () => parse({ image: bad }),
            /machine\.image: .* is not a container image reference/,
            /leave out machine\.image/,
          );
        });
      }

      it('refuses an image no allowlist pattern matches, naming the patterns', () => {
        const policy = { imageAllowlist: ['pytorch/pytorch:*', 'nvcr.io/nvidia/*'], maxDiskGb: 1000 };
        assert.equal(parse({ image: 'pytorch/pytorch:2.4.0' }, policy).image, 'pytorch/pytorch:2.4.0');
        assert.equal(
          parse({ image: 'nvcr.io/nvidia/pytorch:24.05-py3' }, policy).image,
          'nvcr.io/nvidia/pytorch:24.05-py3',
        );
        refuses(
          () => parse({ image: 'pytorch/pytorch' }, policy),
          /machine\.image: this service runs only images matching "pytorch\/pytorch:\*", "nvcr\.io\/nvidia\/\*"/,
        );
        refuses(() => parse({ image: 'evil.io/nvcr.io/nvidia/x' }, policy), /runs only images matching/);
      });

      it("reads a pattern's other characters literally", () => {
        const policy = { imageAllowlist: ['a.b/c'], maxDiskGb: 1000 };
        assert.equal(parse({ image: 'a.b/c' }, policy).image, 'a.b/c');
        refuses(() => parse({ image: 'axb/c' }, policy), /runs only images matching "a\.b\/c"/);
      });
    });

    describe('env', () => {
      it('refuses a lower-case or malformed name, naming it and a valid spelling', () => {
        refuses(
          () => parse({ env: { foo: '1' } }),
          /machine\.env\.foo: variable names are upper-case letters, digits and _/,
          /e\.g\. FOO/,
        );
        refuses(() => parse({ env: { '1ABC': '1' } }), /machine\.env\.1ABC: .*e\.g\. _1ABC/);
        refuses(() => parse({ env: { 'MY-VAR': '1' } }), /machine\.env\.MY-VAR: .*e\.g\. MY_VAR/);
        refuses(() => parse({ env: { '': '1' } }), /machine\.env\.: variable names/);
        const msg = refuses(() => parse({ env: { 'A\nB': '1' } }), /machine\.env\.A\\nB:/);
        assert.ok(!msg.includes('\n'));
      });

      it('refuses the names the machine sets itself (HOME, PATH, PUBLIC_KEY, GPR_*), and takes names that merely contain them', () => {
        for (const name of ['HOME', 'PATH', 'USER', 'SHELL', 'PUBLIC_KEY', 'GPR_MACHINE_BOOT', 'GPR_X']) {
          refuses(
            () => parse({ env: { [name]: '1' } }),
            new RegExp(`machine\\.env\\.${name}: ${name} is set by the machine itself`),
          );
        }
        assert.deepEqual(Object.keys(parse({ env: { MY_HOME: '1', XGPR_A: '2' } }).env), ['MY_HOME', 'XGPR_A']);
      });

      it('takes 50 variables and refuses 51', () => {
        const env = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`V${i}`, 'x']));
        assert.equal(Object.keys(parse({ env: env(50) }).env).length, 50);
        refuses(() => parse({ env: env(51) }), /machine\.env: 51 variables; at most 50\./);
      });

      it('counts a value in UTF-8 bytes: 4,096 pass, one more is refused, and the value is never quoted', () => {
        assert.equal(parse({ env: { A: 'é'.repeat(2048) } }).env.A.length, 2048);
        const msg = refuses(
          () => parse({ env: { SECRET: `${'é'.repeat(2048)}x` } }),
          /machine\.env\.SECRET: the value is 4097 bytes \(UTF-8\); at most 4096\./,
        );
        assert.ok(!msg.includes('éx'));
      });

      it('counts names and values together against 32,768 bytes', () => {
        // Nine values of 4,000 bytes pass one by one but not together.
        const env = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`V${i}`, 'x'.repeat(4000)]));
        refuses(
          () => parse({ env }),
          /machine\.env: names and values are 36018 bytes in all \(UTF-8\); at most 32768\./,
        );
        const eight = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`V${i}`, 'x'.repeat(4094)]));
        assert.equal(Object.keys(parse({ env: eight }).env).length, 8); // 8 × (2 + 4094) = 32,768
      });

      it('refuses a value that no environment can hold', () => {
        refuses(() => parse({ env: { N: 'a\0b' } }), /machine\.env\.N: contains a NUL character/);
        refuses(() => parse({ env: { N: 'a\uD800b' } }), /machine\.env\.N: is not valid UTF-8 text/);
        assert.equal(parse({ env: { N: 'a\uD83D\uDE00b' } }).env.N, 'a😀b');
      });
    });

    describe('startupScript', () => {
      it('takes 16,384 UTF-8 bytes and refuses one more', () => {
        assert.equal(parse({ startupScript: 'é'.repeat(8192) }).startupScript!.length, 8192);
        refuses(
          () => parse({ startupScript: `${'é'.repeat(8192)}x` }),
          /machine\.startupScript: is 16385 bytes \(UTF-8\); at most 16384\./,
        );
      });

      it('refuses an empty script', () => {
        refuses(
          () => parse({ startupScript: '' }),
          /machine\.startupScript: is empty; .*leave out machine\.startupScript/,
        );
        refuses(() => parse({ startupScript: ' \n\t' }), /machine\.startupScript: is empty/);
      });
    });

    describe('ports', () => {
      it('takes up to five distinct ports, in ascending order', () => {
        assert.deepEqual(parse({ ports: [9000, 1, 65535, 8888, 443] }).ports, [1, 443, 8888, 9000, 65535]);
      });

      it("refuses a repeat and SSH's port", () => {
        refuses(() => parse({ ports: [80, 8080, 80] }), /machine\.ports: 80 is listed twice/);
        refuses(() => parse({ ports: [22] }), /machine\.ports: 22 is SSH's port/);
      });
    });

    describe('diskGb', () => {
      it("takes up to the policy's maximum and refuses more", () => {
        assert.equal(parse({ diskGb: 500 }, { imageAllowlist: [], maxDiskGb: 500 }).diskGb, 500);
        refuses(
          () => parse({ diskGb: 501 }, { imageAllowlist: [], maxDiskGb: 500 }),
          /machine\.diskGb: 501 GB is more than this service allows; ask for at most 500\./,
        );
      });
    });
  });

  describe(machineIntentValue.name, () => {
    const base: MachineSettings = {
      image: 'ubuntu:22.04',
      env: { A: '1', B: '2' },
      startupScript: 'echo hi',
      ports: [80, 8080],
      diskGb: 100,
    };

    it('is equal for equal settings in any key order', () => {
      const reordered: MachineSettings = {
        diskGb: 100,
        ports: [8080, 80],
        startupScript: 'echo hi',
        env: { B: '2', A: '1' },
        image: 'ubuntu:22.04',
      };
      assert.equal(JSON.stringify(machineIntentValue(reordered)), JSON.stringify(machineIntentValue(base)));
      assert.deepEqual(
        machineIntentValue({ ...DEFAULT_MACHINE_SETTINGS }),
        machineIntentValue(parseMachineSettings(undefined, ANY)),
      );
    });

    it("changes with the image, a variable's name or value, the script, the ports or the disk", () => {
      const value = JSON.stringify(machineIntentValue(base));
      const changes: Partial<MachineSettings>[] = [
        { image: 'ubuntu:24.04' },
        { image: null },
        { env: { A: '1', C: '2' } },
        { env: { A: '1', B: '3' } },
        { env: { A: '1' } },
        { startupScript: 'echo ho' },
        { startupScript: null },
        { ports: [80] },
        { ports: [80, 8081] },
        { diskGb: 101 },
        { diskGb: null },
      ];
      for (const change of changes)
        assert.notEqual(JSON.stringify(machineIntentValue({ ...base, ...change })), value, JSON.stringify(change));
    });

    it('holds no secret in the clear', () => {
      const text = JSON.stringify(
        machineIntentValue({ ...base, env: { TOKEN: 'hunter2-secret' }, startupScript: 'curl https://x/?k=topsecret' }),
      );
      assert.ok(!text.includes('hunter2-secret'));
      assert.ok(!text.includes('topsecret'));
      assert.ok(!text.includes('TOKEN'));
    });
  });

  describe(unmetSetting.name, () => {
    const all: MachineCapabilities = { customImage: true, startupScript: true, ports: 2, maxDiskGb: 500 };
    const h100 = offerLabel('NVIDIA H100', 'lambda');
    const settings = (s: Partial<MachineSettings>): MachineSettings => ({
      ...DEFAULT_MACHINE_SETTINGS,
      env: {},
      ports: [],
      ...s,
    });

    it('finds nothing unmet in the defaults or in variables, whatever the offer', () => {
      assert.equal(unmetSetting(settings({}), NO_MACHINE_CAPABILITIES, h100), null);
      assert.equal(unmetSetting(settings({ env: { A: '1' } }), NO_MACHINE_CAPABILITIES, h100), null);
      assert.equal(
        unmetSetting(settings({ image: 'x', startupScript: 's', ports: [1, 2], diskGb: 500 }), all, h100),
        null,
      );
    });

    it('decides by the one capability rule that GPU-intent matching and the capacity wait use', () => {
      const offers: MachineCapabilities[] = [
        NO_MACHINE_CAPABILITIES,
        all,
        { customImage: false, startupScript: true, ports: 1, maxDiskGb: null },
        { customImage: true, startupScript: false, ports: 0, maxDiskGb: 100 },
      ];
      const asks = [
        settings({}),
        settings({ image: 'x' }),
        settings({ startupScript: 's' }),
        settings({ ports: [1] }),
        settings({ ports: [1, 2] }),
        settings({ diskGb: 100 }),
        settings({ diskGb: 101 }),
        settings({ image: 'x', startupScript: 's', ports: [1, 2], diskGb: 500 }),
      ];
      for (const caps of offers)
        for (const s of asks)
          assert.equal(unmetSetting(s, caps, h100) === null, honoursNeeds(caps, needsOf(s)), JSON.stringify([caps, s]));
    });

    it('names the first setting the offer cannot honour, and what to rent instead', () => {
      assert.equal(
        unmetSetting(settings({ image: 'x', startupScript: 's' }), NO_MACHINE_CAPABILITIES, h100),
        'machine.image: offer "NVIDIA H100" (lambda) cannot run a custom image; rent an offer whose capabilities.customImage is true, or leave out machine.image for its default image.',
      );
      assert.match(
        unmetSetting(settings({ startupScript: 's' }), NO_MACHINE_CAPABILITIES, h100)!,
        /^machine\.startupScript: offer "NVIDIA H100" \(lambda\) cannot run a startup script; rent an offer whose capabilities\.startupScript is true/,
      );
      assert.match(
        unmetSetting(settings({ ports: [80] }), NO_MACHINE_CAPABILITIES, h100)!,
        /^machine\.ports: offer "NVIDIA H100" \(lambda\) cannot expose ports; rent an offer whose capabilities\.ports is at least 1/,
      );
      assert.match(
        unmetSetting(settings({ ports: [1, 2, 3] }), all, h100)!,
        /^machine\.ports: offer .* exposes at most 2 ports, not 3; rent an offer whose capabilities\.ports is at least 3/,
      );
      assert.match(
        unmetSetting(settings({ diskGb: 10 }), NO_MACHINE_CAPABILITIES, h100)!,
        /^machine\.diskGb: offer .* cannot choose its disk; rent an offer whose capabilities\.maxDiskGb is at least 10/,
      );
      assert.match(
        unmetSetting(settings({ diskGb: 501 }), all, h100)!,
        /^machine\.diskGb: offer .* offers at most 500 GB of disk, not 501; rent an offer whose capabilities\.maxDiskGb is at least 501/,
      );
    });
  });

  describe(leaseSeconds.name, () => {
    const lease = (
      terminateAfterSeconds: number | null,
      keyMaxRentalSeconds: number | null,
      offerMaximumDurationSeconds = 86_400,
    ) => leaseSeconds({ terminateAfterSeconds, keyMaxRentalSeconds, offerMaximumDurationSeconds });

    it("is the rental's own when the offer and the key allow it", () => {
      assert.equal(lease(60, null), 60);
      assert.equal(lease(3600, 3600), 3600);
      assert.equal(lease(86_400, null), 86_400);
    });

    it("is the key's maximum without one, capped to the offer's; null with neither", () => {
      assert.equal(lease(null, 7200), 7200);
      assert.equal(lease(null, 7200, 3600), 3600);
      assert.equal(lease(null, null), null);
    });

    it("refuses a lease past the offer's maximum duration", () => {
      refuses(
        () => lease(86_401, null),
        /terminateAfterSeconds: 86401 is longer than this offer's maximum duration of 86400 seconds \(1 day\); send at most 86400/,
      );
    });

    it("refuses a lease past the key's maximum, never shortening it, in seconds and in words", () => {
      refuses(
        () => lease(5401, 5400),
        /terminateAfterSeconds: 5401 is longer than this key allows: its rentals last at most 5400 seconds \(1 hour 30 minutes\); send at most 5400/,
      );
    });

    it('names the tighter limit when both are passed', () => {
      refuses(() => lease(10_000, 3600, 7200), /this key allows: .* 3600 seconds \(1 hour\)/);
      refuses(() => lease(10_000, 9000, 7200), /this offer's maximum duration of 7200 seconds \(2 hours\)/);
    });
  });

  describe('configuration', () => {
    it('reads MACHINE_IMAGE_ALLOWLIST as trimmed patterns, empty when unset', () => {
      assert.deepEqual(loadConfig({}).machines.imageAllowlist, []);
      assert.deepEqual(
        loadConfig({ MACHINE_IMAGE_ALLOWLIST: ' pytorch/pytorch:* , nvcr.io/nvidia/*,' }).machines.imageAllowlist,
        ['pytorch/pytorch:*', 'nvcr.io/nvidia/*'],
      );
    });

    it('refuses a pattern no image reference could match, naming the variable', () => {
      assert.throws(
        () => loadConfig({ MACHINE_IMAGE_ALLOWLIST: 'pytorch/pytorch:*,my image' }),
        (err: unknown) =>
          err instanceof ConfigError &&
          /^MACHINE_IMAGE_ALLOWLIST must be a comma-separated list of image patterns .*, got "my image"$/.test(
            err.message,
          ),
      );
    });

    it('reads MACHINE_MAX_DISK_GB, 1000 when unset, refusing what is not a size', () => {
      assert.equal(loadConfig({}).machines.maxDiskGb, 1000);
      assert.equal(loadConfig({ MACHINE_MAX_DISK_GB: '250' }).machines.maxDiskGb, 250);
      for (const bad of ['0', '1.5', 'lots', '100001']) {
        assert.throws(
          () => loadConfig({ MACHINE_MAX_DISK_GB: bad }),
          (err: unknown) => err instanceof ConfigError && err.message.startsWith('MACHINE_MAX_DISK_GB must be'),
          bad,
        );
      }
    });
  });
});
