import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(fileURLToPath(import.meta.url), '../../..');

function sources(dir: string): { path: string; text: string }[] {
  const out: { path: string; text: string }[] = [];
  for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })) {
    if (!e.isFile() || !e.name.endsWith('.ts')) continue;
    const full = join(e.parentPath, e.name);
    const path = relative(ROOT, full);
    if (path.startsWith('src/generated/')) continue;
    out.push({ path, text: readFileSync(full, 'utf8') });
  }
  assert.ok(out.length > 0, `no sources under ${dir}`);
  return out;
}

const imports = (text: string) =>
  [...text.matchAll(/^\s*(?:import|export)\b[^;]*?from\s+'([^']+)'/gm)].map((m) => m[1]);

/**
 * The import circles among `files`, type-only imports included (a circle of types is still one
 * the code must be read around, and ESLint's import-x/no-cycle does not see those). Each circle is
 * named once, by its files in import order from the smallest path.
 */
function importCircles(files: { path: string; text: string }[]): string[] {
  const known = new Set(files.map((f) => f.path));
  const edges = new Map<string, string[]>();
  for (const f of files) {
    const targets = imports(f.text)
      .filter((i) => i.startsWith('.'))
      .map((i) => normalize(join(dirname(f.path), i)).replace(/\.js$/, '.ts'))
      .filter((t) => known.has(t));
    edges.set(f.path, targets);
  }
  const circles = new Set<string>();
  const walk = (path: string[], at: string) => {
    for (const next of edges.get(at) ?? []) {
      if (next === path[0]) {
        const start = path.indexOf([...path].sort()[0]);
        circles.add([...path.slice(start), ...path.slice(0, start)].join(' -> '));
      } else if (!path.includes(next) && next > path[0]) {
        walk([...path, next], next);
      }
    }
  };
  for (const f of [...known].sort()) walk([f], f);
  return [...circles];
}

/** The files of the composition root, which builds on every module: nothing below may import them. */
const COMPOSITION_ROOT = new Set([
  'src/container.ts',
  'src/controllers.ts',
  'src/entities.ts',
  'src/main.ts',
  'src/repositories.ts',
]);

/** Each import of `files` that reaches up into src/modules/ or the composition root, as `path -> import`. */
function upwardImports(files: { path: string; text: string }[]): string[] {
  return files.flatMap((f) =>
    imports(f.text)
      .filter((i) => i.startsWith('.'))
      .filter((i) => {
        const target = normalize(join(dirname(f.path), i)).replace(/\.js$/, '.ts');
        return target.startsWith('src/modules/') || COMPOSITION_ROOT.has(target);
      })
      .map((i) => `${f.path} -> ${i}`),
  );
}

/**
 * Every module a source names: static imports and re-exports, side-effect imports, dynamic
 * `import()` and `require()`, so a check of what a file may depend on misses none of its ways in.
 */
const specifiers = (text: string) =>
  [
    // The clause before `from` holds names only: no `=` or quote, so a string that reads like an import is none.
    ...text.matchAll(/^\s*(?:import|export)\b[^;'"=]*?\bfrom\s+['"]([^'"]+)['"]/gm),
    ...text.matchAll(/^\s*import\s+['"]([^'"]+)['"]/gm),
    ...text.matchAll(/\b(?:import|require)\s*\(\s*['"]([^'"]+)['"]/g),
  ].map((m) => m[1]);

/** Each module a file of the shared vocabulary names outside src/vocabulary/ (an npm package, a Node built-in, the rest of src/), as `path -> import`. */
function vocabularyEscapes(files: { path: string; text: string }[]): string[] {
  return files.flatMap((f) =>
    specifiers(f.text)
      .filter((i) => !i.startsWith('.') || !normalize(join(dirname(f.path), i)).startsWith('src/vocabulary/'))
      .map((i) => `${f.path} -> ${i}`),
  );
}

/** The imports into clients/ the service may make: the remote MCP endpoint's, of the tool server and the SDK's client. */
const REMOTE_MCP_DOOR = [
  'src/modules/mcp/remote-mcp.router.ts -> @gpu-rental/sdk',
  'src/modules/mcp/remote-mcp.router.ts -> ../../../clients/mcp/src/server.js',
];

/** Each import of `files` that reaches into clients/, as `path -> import`. */
function clientImports(files: { path: string; text: string }[]): string[] {
  return files.flatMap((f) =>
    specifiers(f.text)
      .filter((i) =>
        i.startsWith('.') ? normalize(join(dirname(f.path), i)).startsWith('clients/') : i.startsWith('@gpu-rental/'),
      )
      .map((i) => `${f.path} -> ${i}`),
  );
}

/** A write of a deployment's or order's status: a TypeORM update whose values set it, or SQL that does. */
const STATUS_WRITE = [
  /\.update\(\s*(?:Deployment|Order)\b[^;]*?\}\s*,\s*\{[^}]*\bstatus\s*:/,
  /getRepository\(\s*(?:Deployment|Order)\s*\)\s*\.update\([^;]*?\}\s*,\s*\{[^}]*\bstatus\s*:/,
  /\.update\(\s*(?:Deployment|Order)\s*\)\s*\.set\(\s*\{[^}]*\bstatus\s*:/,
  /UPDATE\s+(?:deployments|orders)\b[^`]*\bSET\b[^`]*[\s,]status\s*=/i,
];
const writesStatus = (text: string) => STATUS_WRITE.some((re) => re.test(text));

/** Expressions that may be spliced into SQL text: constants of our code and placeholder lists. */
const SAFE_SPLICES = [
  /^[A-Z][A-Z0-9_]*$/, // a module constant: table or column list
  /^\w+\.sql$/, // derivedTable(): placeholders only
  /^\w+(?:\.\w+)*\.map\(\(\) => '\?'\)\.join\(', '\)$/, // one placeholder per value
  // The job repository's filters and sort orders: fixed fragments with placeholders, chosen in code.
  /^whereClause\(/,
  /^orderBy\(sort\)$/,
  /^condition$/,
  /^conditions\.join\(' AND '\)$/,
  // entity-rows.ts: the entity's table and column names, from its TypeORM metadata.
  /^meta\.tableName$/,
  /^names\.join\(', '\)$/,
  /^\w+ \? '[^'$`]*' : '[^'$`]*'$/, // a choice between two fixed fragments
];

/**
 * What a source splices into SQL text other than {@link SAFE_SPLICES}. The pool runs with
 * multipleStatements (src/db/data-source.ts), so values must stay `?` parameters.
 */
function unsafeSplices(text: string): string[] {
  const out: string[] = [];
  for (const [, body] of text.matchAll(/`((?:\\[\s\S]|[^`\\])*)`/g)) {
    if (!/\b(?:SELECT\s[\s\S]*\sFROM|INSERT\s+(?:IGNORE\s+)?INTO|UPDATE\s+\S+[\s\S]*\sSET|DELETE\s+FROM)\b/.test(body))
      continue;
    for (const [, expr] of body.matchAll(/\$\{([^}]*(?:\{[^}]*\}[^}]*)*)\}/g)) {
      if (!SAFE_SPLICES.some((re) => re.test(expr.trim()))) out.push(expr.trim());
    }
  }
  return out;
}

/**
 * Issuing SQL in any style: raw text, a query builder, a TypeORM repository, an entity manager's
 * call naming an entity class, a transaction of plain mysql2 statements, or its entity-row writer.
 */
const ISSUES_SQL =
  /\.query\(|\bcreateQueryBuilder\b|\bgetRepository\(|\bsqlQuery\(|\bnew SqlTransaction\b|\binsertEntity\(|\b[a-z]\w*\.(?:find\w*|update|insert|save|delete|remove|count\w*|exist\w*|increment|decrement|upsert|softDelete|sum|average|minimum|maximum)\(\s*[A-Z]\w*\s*,/;

/** Where SQL belongs: the repositories (the job system's storage among them) and the database layer they stand on. */
const issuesSqlByRight = (path: string) => path.endsWith('.repository.ts') || path.startsWith('src/db/');

describe('architecture', () => {
  it('reads process.env only in src/config.ts', () => {
    const offenders = [...sources('src'), ...sources('bot')].filter(
      (f) => f.path !== 'src/config.ts' && /process\.env\b/.test(f.text),
    );
    assert.deepEqual(
      offenders.map((f) => f.path),
      [],
    );
  });

  it('keeps raw SQL out of bot/', () => {
    const offenders = sources('bot').filter((f) =>
      /\.query\(|\b(?:SELECT\s[\s\S]*?\sFROM|INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET)\b/.test(f.text),
    );
    assert.deepEqual(
      offenders.map((f) => f.path),
      [],
    );
  });

  it('writes rental statuses only in the rental-state module (its rules and its repository)', () => {
    // The check itself must see the shapes it looks for.
    assert.ok(writesStatus(`await m.update(Deployment, { id }, { status: 'ACTIVE', updatedAt: now });`));
    assert.ok(writesStatus(`await ds.getRepository(Order).update({ id }, { status: 'FAILED' });`));
    assert.ok(writesStatus(`qb.update(Deployment).set({ status: 'TERMINATING' })`));
    assert.ok(writesStatus('await m.query(`UPDATE orders SET updated_at = ?, status = ? WHERE id = ?`)'));
    assert.ok(
      !writesStatus(`await m.update(Order, { id: o.id, reversalStatus: 'PENDING' }, { reversalStatus: 'SUCCEEDED' });`),
    );
    const stateModule = new Set([
      'src/modules/rentals/state/rental-state.ts',
      'src/modules/rentals/state/rental-state.repository.ts',
    ]);
    const offenders = [...sources('src'), ...sources('bot')].filter(
      (f) => !stateModule.has(f.path) && writesStatus(f.text),
    );
    assert.deepEqual(
      offenders.map((f) => f.path),
      [],
    );
  });

  it('splices only our own constants and placeholder lists into SQL text, never a value', () => {
    // The check itself must see the shapes it looks for, escaped backticks included.
    assert.deepEqual(unsafeSplices('q(`SELECT * FROM t WHERE id = ${req.body.id}`)'), ['req.body.id']);
    assert.deepEqual(unsafeSplices('q(`INSERT INTO \\`${meta.tableName}\\` (a) VALUES (${name})`)'), ['name']);
    assert.deepEqual(
      unsafeSplices("q(`UPDATE ${AGENDA_JOBS_TABLE} SET a = ? WHERE id IN (${ids.map(() => '?').join(', ')})`)"),
      [],
    );
    const offenders = [...sources('src'), ...sources('plugins'), ...sources('bot')].flatMap((f) =>
      unsafeSplices(f.text).map((e) => `${f.path}: \${${e}}`),
    );
    assert.deepEqual(offenders, []);
  });

  it('the lower layers (db, http, jobs, providers) import neither a module nor the composition root', () => {
    // The check itself must see an entity list kept under db/, and the composition root imported from below.
    assert.deepEqual(
      upwardImports([
        { path: 'src/db/entities.ts', text: `import { Account } from '../modules/accounts/account.entity.js';` },
        {
          path: 'src/jobs/x.ts',
          text: `import type { Services } from '../container.js';\nimport { entities } from '../entities.js';`,
        },
        { path: 'src/db/y.ts', text: `import { sql } from './sql.js';` },
      ]),
      [
        'src/db/entities.ts -> ../modules/accounts/account.entity.js',
        'src/jobs/x.ts -> ../container.js',
        'src/jobs/x.ts -> ../entities.js',
      ],
    );
    const lower = ['src/db', 'src/http', 'src/jobs', 'src/providers'].flatMap((dir) => sources(dir));
    assert.deepEqual(upwardImports(lower), []);
  });

  it('keeps the shared vocabulary pure: src/vocabulary/ imports only its own files, no package or built-in', () => {
    // The check itself must see each way out (a package, a built-in, the rest of src/, a dynamic
    // import), and not take a code snippet held in a string for an import.
    assert.deepEqual(
      vocabularyEscapes([
        { path: 'src/vocabulary/a.ts', text: `import { b } from './b.js';\nexport * from './c.js';` },
        {
          path: 'src/vocabulary/s.ts',
          text: `export const SNIPPET = [\n  "import { createHmac } from 'node:crypto';",\n];`,
        },
        { path: 'src/vocabulary/x.ts', text: `import { z } from 'zod';\nimport { join } from 'node:path';` },
        {
          path: 'src/vocabulary/y.ts',
          text: `import type { Config } from '../config.js';\nconst m = await import('fs');`,
        },
      ]),
      [
        'src/vocabulary/x.ts -> zod',
        'src/vocabulary/x.ts -> node:path',
        'src/vocabulary/y.ts -> ../config.js',
        'src/vocabulary/y.ts -> fs',
      ],
    );
    assert.deepEqual(vocabularyEscapes(sources('src/vocabulary')), []);
  });

  it('the service, the bot and the plugins import nothing from clients/ (the clients build on src/vocabulary/) but the remote MCP door', () => {
    // The check itself must see a relative path into clients/ and the SDK by its package name.
    assert.deepEqual(
      clientImports([
        { path: 'src/http/a.ts', text: `import { AUTH_HINT } from '../../clients/sdk/src/hints.js';` },
        { path: 'bot/b.ts', text: `import { GprClient } from '@gpu-rental/sdk';` },
        { path: 'src/c.ts', text: `import { AUTH_HINT } from './vocabulary/access-hints.js';` },
      ]),
      ['src/http/a.ts -> ../../clients/sdk/src/hints.js', 'bot/b.ts -> @gpu-rental/sdk'],
    );
    // One door: the remote MCP endpoint serves gpr-mcp's own tool server, which drives the SDK's
    // client, so the tools exist once; nothing below clients/ imports the service back.
    assert.deepEqual(
      clientImports([...sources('src'), ...sources('bot'), ...sources('plugins')]).filter(
        (i) => !REMOTE_MCP_DOOR.includes(i),
      ),
      [],
    );
  });

  it('has no import circle among the files of src/, type imports included', () => {
    // The check itself must see a circle made only of type imports.
    assert.deepEqual(
      importCircles([
        { path: 'a/x.ts', text: `import type { Y } from './y.js';` },
        { path: 'a/y.ts', text: `import { X } from './x.js';` },
      ]),
      ['a/x.ts -> a/y.ts'],
    );
    assert.deepEqual(importCircles(sources('src')), []);
  });

  it('has no import circle among the files of bench/, type imports included', () => {
    assert.deepEqual(importCircles(sources('bench')), []);
  });

  it('keeps every file under src/ (but the generated routes) at 400 lines or fewer', () => {
    const long = sources('src')
      .map((f) => ({ path: f.path, lines: f.text.split('\n').length - (f.text.endsWith('\n') ? 1 : 0) }))
      .filter((f) => f.lines > 400);
    assert.deepEqual(
      long.map((f) => `${f.path}: ${f.lines} lines`),
      [],
    );
  });

  it('issues SQL only in repositories (and src/db, the layer they stand on), nowhere else', () => {
    // The check itself must see each style of issuing SQL, and leave the plain calls alone.
    for (const text of [
      'm.query(`SELECT 1`)',
      'ds.getRepository(Account).findOneBy({ id })',
      'm.createQueryBuilder().update(X)',
      'sqlQuery(ds, `SELECT 1`)',
      'new SqlTransaction(ds, conn)',
      'insertEntity(m, Order, order)',
      'await m.update(Order, { id }, patch)',
      'm.findOneBy(Deployment, { id })',
      'em.insert(DeploymentAttempt, row)',
    ]) {
      assert.ok(ISSUES_SQL.test(text), text);
    }
    for (const text of [
      'inPipelinedTransaction(ds, fn)',
      'inTransaction(ds, fn)',
      'req.query.limit',
      'type Sql = SqlTransaction',
      'rows.find((r) => r.id)',
      'map.delete(key)',
      'list.find(x => x)',
    ])
      assert.ok(!ISSUES_SQL.test(text), text);
    const issuing = [...sources('src'), ...sources('bot')]
      .filter((f) => !issuesSqlByRight(f.path) && ISSUES_SQL.test(f.text))
      .map((f) => f.path);
    assert.deepEqual(issuing, [], 'SQL outside a repository');
  });

  it('billing imports nothing from rentals (rentals implement the card-order interface billing declares)', () => {
    const offenders = sources('src/modules/billing').flatMap((f) =>
      imports(f.text)
        .filter((i) => normalize(join(dirname(f.path), i)).startsWith('src/modules/rentals/'))
        .map((i) => `${f.path} -> ${i}`),
    );
    assert.deepEqual(offenders, []);
  });

  it("imports the rentals module's controllers (rentals/api/) only from the composition root", () => {
    const offenders = [...sources('src'), ...sources('bot')]
      .filter((f) => !f.path.startsWith('src/modules/rentals/api/') && !COMPOSITION_ROOT.has(f.path))
      .flatMap((f) =>
        imports(f.text)
          .filter((i) => normalize(join(dirname(f.path), i)).startsWith('src/modules/rentals/api/'))
          .map((i) => `${f.path} -> ${i}`),
      );
    assert.deepEqual(offenders, []);
  });

  it('no module imports the composition root', () => {
    const modules = sources('src/modules').flatMap((f) =>
      imports(f.text)
        .filter((i) => /container\.js$/.test(i))
        .map((i) => `${f.path} -> ${i}`),
    );
    assert.deepEqual(modules, []);
  });
});
