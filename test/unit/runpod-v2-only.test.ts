import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import ts from 'typescript';
import runpodPlugin from '../../plugins/runpod/index.js';
import { errorRule } from '../../plugins/runpod/errors.js';

const PLUGIN_DIR = new URL('../../plugins/runpod/', import.meta.url);
const DOC = new URL('../../docs/providers/runpod.md', import.meta.url);

/** Every `plugins/runpod/*.ts`, parsed. */
function pluginSources(): ts.SourceFile[] {
  const files = readdirSync(PLUGIN_DIR).filter((f) => f.endsWith('.ts'));
  assert.ok(files.length >= 5, `only ${files.length} files in plugins/runpod`);
  return files.map((f) =>
    ts.createSourceFile(f, readFileSync(new URL(f, PLUGIN_DIR), 'utf8'), ts.ScriptTarget.Latest, true),
  );
}

/** A string or template literal's text, each substitution written `{}`; null for any other node. */
function literalText(node: ts.Node): string | null {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node))
    return node.head.text + node.templateSpans.map((s) => `{}${s.literal.text}`).join('');
  return null;
}

function walk(node: ts.Node, visit: (n: ts.Node) => void): void {
  visit(node);
  node.forEachChild((c) => walk(c, visit));
}

/** Every string and template literal of the plugin, with where it is. */
function pluginLiterals(): { where: string; text: string }[] {
  const out: { where: string; text: string }[] = [];
  for (const sf of pluginSources())
    walk(sf, (n) => {
      const text = literalText(n);
      if (text !== null && !ts.isTemplateExpression(n.parent))
        out.push({ where: `${sf.fileName}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1}`, text });
    });
  return out;
}

/** The code of the plugin without its comments, token by token (a comment may name GraphQL; code may not). */
function codeTokens(sf: ts.SourceFile): string[] {
  const tokens: string[] = [];
  const isDoc = (n: ts.Node) => n.kind >= ts.SyntaxKind.FirstJSDocNode && n.kind <= ts.SyntaxKind.LastJSDocNode;
  const visit = (n: ts.Node): void => {
    if (isDoc(n)) return;
    const children = n.getChildren(sf);
    if (children.length === 0) tokens.push(n.getText(sf));
    else children.forEach(visit);
  };
  visit(sf);
  return tokens.filter((t) => t.length > 0);
}

/** `METHOD /path` of every `<client>.request(bucket, method, path, ...)` call, substitutions as `{}`. */
function requestCalls(): { where: string; call: string | null }[] {
  const out: { where: string; call: string | null }[] = [];
  for (const sf of pluginSources())
    walk(sf, (n) => {
      if (!ts.isCallExpression(n) || !ts.isPropertyAccessExpression(n.expression)) return;
      if (n.expression.name.text !== 'request' || n.arguments.length < 3) return;
      const method = literalText(n.arguments[1]);
      const path = literalText(n.arguments[2]);
      out.push({
        where: `${sf.fileName}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1}`,
        call: method === null || path === null ? null : `${method} ${path}`,
      });
    });
  return out;
}

/** The "REST v1 retired" section of the RunPod page. */
function retiredSection(): string {
  const doc = readFileSync(DOC, 'utf8');
  const m = /^## REST v1 retired\n([\s\S]*?)(?=^## )/m.exec(doc);
  assert.ok(m, 'docs/providers/runpod.md has no "## REST v1 retired" section');
  return m[1];
}

/** The calls the section's table names (`GET /v2/pods/{id}`), query strings left off, names of substitutions as `{}`. */
function documentedCalls(): Set<string> {
  const rows = retiredSection()
    .split('\n')
    .filter((l) => l.startsWith('|'));
  const calls = rows.flatMap((r) =>
    [...r.matchAll(/`(GET|POST|PUT|PATCH|DELETE) (\/[^`\s?]*)/g)].map(
      (m) => `${m[1]} ${m[2].replace(/\{[^}]*\}/g, '{}')}`,
    ),
  );
  assert.ok(calls.length > 0, 'the "REST v1 retired" section has no table of calls');
  return new Set(calls);
}

const V1_PATH = /(^|[\s"'`(])\/v1(\/|\b)/i;

describe('RunPod: REST v2 only (static)', () => {
  it('names no REST v1 path or host in any string of plugins/runpod', () => {
    const literals = pluginLiterals();
    assert.ok(
      literals.some((l) => l.text === '/v2/pods'),
      'the scan found no request path at all',
    );
    const offenders = literals.filter(
      (l) => V1_PATH.test(l.text) || /rest\.runpod\.io\/v1/i.test(l.text) || l.text.trim().startsWith('/v1'),
    );
    assert.deepEqual(offenders, []);
  });

  it('makes every request through the client with a literal /v2/ path, and the docs table lists exactly those calls', () => {
    const calls = requestCalls();
    assert.ok(calls.length >= 5, `only ${calls.length} request calls found`);
    assert.deepEqual(
      calls.filter((c) => c.call === null),
      [],
      'a request whose method or path is not a literal: this check cannot see where it goes',
    );
    const documented = documentedCalls();
    const graphqlDocumented = [...documented].some((c) => /graphql/i.test(c));
    for (const { where, call } of calls) {
      const path = call!.split(' ')[1];
      assert.ok(
        path.startsWith('/v2/') || (graphqlDocumented && /^\/graphql\b/.test(path)),
        `${where}: ${call} is not a REST v2 path`,
      );
    }
    assert.deepEqual(
      [...new Set(calls.map((c) => c.call!))].sort(),
      [...documented].sort(),
      'docs/providers/runpod.md "REST v1 retired" lists a call the plugin does not make, or misses one it makes',
    );
  });

  it('has no code that says graphql unless the docs table lists a GraphQL call, and no HTTP of its own', () => {
    const graphqlDocumented = [...documentedCalls()].some((c) => /graphql/i.test(c));
    for (const sf of pluginSources()) {
      const tokens = codeTokens(sf);
      assert.ok(tokens.length > 10, `${sf.fileName}: the scanner read nothing`);
      if (!graphqlDocumented)
        assert.deepEqual(
          tokens.filter((t) => /graphql/i.test(t)),
          [],
          `${sf.fileName} speaks of GraphQL in code, and the docs list no GraphQL call`,
        );
      // Only the shared client's `request` is read above: a `fetch` or an HTTP module of the plugin's own would escape it.
      assert.deepEqual(
        tokens.filter((t) => t === 'fetch' || /^['"]node:(http|https|net)['"]$|^['"]undici['"]$/.test(t)),
        [],
        `${sf.fileName} makes HTTP calls of its own`,
      );
    }
    assert.match(retiredSection(), /GraphQL/, 'the section says what the plugin does about GraphQL');
  });
});

describe('RunPod: a retired API at start and in answers', () => {
  it('refuses an API_URL with a version in its path, naming the variable and asking for the origin only', () => {
    const refusal = (raw: Record<string, string>): string => {
      try {
        runpodPlugin.validateOptions(raw);
      } catch (err) {
        return (err as Error).message;
      }
      assert.fail(`${JSON.stringify(raw)} was accepted`);
    };
    const api = (url: string) => refusal({ API_KEY: 'k', API_URL: url });
    for (const url of ['https://rest.runpod.io/v1', 'https://rest.runpod.io/v1/', 'https://proxy.example/runpod/v1'])
      assert.match(api(url), /^RUNPOD_PROVIDER_API_URL .*; RunPod retired REST v1 .*: give the origin only$/, url);
    for (const url of ['https://api.runpod.io/v2', 'https://api.runpod.io/v2/pods'])
      assert.match(
        api(url),
        /^RUNPOD_PROVIDER_API_URL .*; the plugin puts \/v2 in front .*: give the origin only$/,
        url,
      );
    // Any other path keeps the kit's refusal, without a word about versions.
    assert.match(
      api('https://api.runpod.io/api'),
      /^RUNPOD_PROVIDER_API_URL must be an http\(s\) origin without a path/,
    );
    assert.doesNotMatch(api('https://api.runpod.io/api'), /retired|give the origin only/);
    // Another option's error is left as it was; a password in the value is never quoted.
    assert.match(refusal({ API_URL: 'https://rest.runpod.io/v1' }), /^RUNPOD_PROVIDER_API_KEY is required/);
    assert.doesNotMatch(api('https://u:pw-123@rest.runpod.io/v1'), /pw-123/);
    assert.equal(
      runpodPlugin.validateOptions({ API_KEY: 'k', API_URL: 'https://api.runpod.io/' }).apiUrl,
      'https://api.runpod.io',
    );
  });

  it('reads a 410 as a retired path, a request error, never "nothing there"', () => {
    const rule = errorRule(410, 'Gone');
    assert.deepEqual([rule.read, rule.create, rule.log], ['request', 'rejected', 'error']);
    assert.match(rule.note, /retired/);
  });
});
