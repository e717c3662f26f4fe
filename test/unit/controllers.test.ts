import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Services } from '../../src/container.js';
import type { ControllerClass } from '../../src/http/ioc.js';

const ROOT = join(fileURLToPath(import.meta.url), '../../..');

/** Every controller class tsoa generates routes for (tsoa.json: src/modules/**\/*.controller.ts). */
async function controllerClasses(): Promise<{ path: string; name: string; ctor: ControllerClass }[]> {
  const out: { path: string; name: string; ctor: ControllerClass }[] = [];
  for (const e of readdirSync(join(ROOT, 'src/modules'), { withFileTypes: true, recursive: true })) {
    if (!e.isFile() || !e.name.endsWith('.controller.ts')) continue;
    const full = join(e.parentPath, e.name);
    const exported = (await import(pathToFileURL(full).href)) as Record<string, unknown>;
    for (const [name, value] of Object.entries(exported)) {
      if (typeof value === 'function' && name.endsWith('Controller'))
        out.push({ path: relative(ROOT, full), name, ctor: value as ControllerClass });
    }
  }
  return out;
}

describe('controllers', () => {
  it('has a factory for every controller tsoa routes to', async () => {
    const classes = await controllerClasses();
    assert.ok(classes.length >= 10, `found ${classes.length}`);
    // Loaded the way the classes were, so both name the same class objects.
    const { controllerFactories } = (await import(
      pathToFileURL(join(ROOT, 'src/controllers.ts')).href
    )) as typeof import('../../src/controllers.js');
    // The factories are only registered here, not run, so no service is needed.
    const factories = controllerFactories({} as Services);
    assert.deepEqual(
      classes.filter((c) => !factories.has(c.ctor)).map((c) => `${c.path}: ${c.name}`),
      [],
    );
  });
});
