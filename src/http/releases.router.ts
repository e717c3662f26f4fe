import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Router, type Request, type Response } from 'express';
import type { Config } from '../config.js';
import { errorEnvelope } from '../errors/envelope.js';
import type { Logger } from '../logger.js';
import { unzipSync, zipSync, type Zippable } from 'fflate';
import { PACKAGED_SERVICE_FILE } from '../vocabulary/releases.js';
import { withTarEntry } from './release-tarball.js';

/** One released file, as listed in `latest.json`. */
export interface ReleaseArtifact {
  name: string;
  file: string;
  /** Absolute when served; as written by `npm run release`, relative to `latest.json`. */
  url: string;
  sha256: string;
  size: number;
}

/** `{releases_url}/latest.json`: the current client release (see scripts/release.ts). */
export interface ReleaseManifest {
  version: string;
  pub_date: string;
  artifacts: Record<string, ReleaseArtifact>;
}

export const MANIFEST_FILE = 'latest.json';
export const CHECKSUMS_FILE = 'SHA256SUMS';

const CONTENT_TYPES: Record<string, string> = { '.tgz': 'application/gzip', '.zip': 'application/zip' };

/** The manifest key of the agent skill's zip. */
export const SKILL_ARTIFACT = 'skill';

/**
 * The skill's placeholders filled with the addresses of the service serving it: `{base_url}`
 * (PUBLIC_BASE_URL) and `{releases_url}` (RELEASES_URL). The skill's sources keep the
 * placeholders, so a copy hosted anywhere else still reads as a template.
 */
export function fillSkillPlaceholders(text: string, urls: { baseUrl: string; releasesUrl: string }): string {
  return text.replaceAll('{base_url}', urls.baseUrl).replaceAll('{releases_url}', urls.releasesUrl);
}

const SKILL_ZIP_MTIME = new Date('2000-01-01T00:00:00Z');

/** The released skill zip with its text files filled in, as this service serves it. */
function filledSkillZip(zip: Buffer, urls: { baseUrl: string; releasesUrl: string }): Buffer {
  const files: Zippable = {};
  for (const [name, bytes] of Object.entries(unzipSync(zip))) {
    const content = name.endsWith('.md')
      ? Buffer.from(fillSkillPlaceholders(Buffer.from(bytes).toString('utf8'), urls), 'utf8')
      : bytes;
    // The dates `npm run release` writes, so the served bytes depend on the content only.
    files[name] = [content, { mtime: SKILL_ZIP_MTIME }];
  }
  return Buffer.from(zipSync(files, { level: 9 }));
}

/** The manifest keys of the client tarballs (`npm pack` of the CLI and the MCP server). */
export const CLIENT_ARTIFACTS = ['cli', 'mcp'] as const;

/** A client tarball with {@link PACKAGED_SERVICE_FILE} added: installed from here, it calls this service by default. */
function tarballForService(tgz: Buffer, urls: { baseUrl: string }): Buffer {
  return withTarEntry(tgz, `package/${PACKAGED_SERVICE_FILE}`, `${JSON.stringify({ baseUrl: urls.baseUrl })}\n`);
}

/** How each artifact is made this service's own before it is served. */
const FILLERS: Record<string, (bytes: Buffer, urls: { baseUrl: string; releasesUrl: string }) => Buffer> = {
  [SKILL_ARTIFACT]: filledSkillZip,
  ...Object.fromEntries(CLIENT_ARTIFACTS.map((k) => [k, tarballForService])),
};

/**
 * Serves the client releases built by `npm run release` when RELEASES_URL points at this service
 * (by default `${PUBLIC_BASE_URL}/releases`); elsewhere they are hosted by someone else and this
 * router is empty. Only files the manifest lists (and SHA256SUMS) are served.
 */
export function releasesRouter(config: Pick<Config, 'http' | 'releases'>, logger: Logger): Router {
  const router = Router();
  const { publicBaseUrl } = config.http;
  const { url: releasesUrl, dir } = config.releases;
  const base = `${publicBaseUrl}/`;
  if (!releasesUrl.startsWith(base)) return router;
  const prefix = new URL(releasesUrl).pathname.replace(/\/+$/, '');
  const manifestPath = join(dir, MANIFEST_FILE);
  if (existsSync(manifestPath))
    logger.info({ dir, url: releasesUrl }, `client releases served at ${releasesUrl}/${MANIFEST_FILE}`);
  else
    logger.warn(
      { dir },
      `client releases: none built in ${dir} yet; ${prefix}/${MANIFEST_FILE} answers 404 until one is (\`npm run release\`, which \`npm start\` runs in the background)`,
    );

  const urls = { baseUrl: publicBaseUrl, releasesUrl };
  // The filled artifacts of the last release seen, each keyed by its released file's hash.
  const filledCache = new Map<string, { sha256: string; bytes: Buffer }>();

  /** The artifact as this service serves it: the skill's placeholders filled, the clients told which service they came from. */
  const fill = (key: string, a: ReleaseArtifact): { file: string; bytes: Buffer } | null => {
    const fillBytes = FILLERS[key];
    if (!fillBytes || !existsSync(join(dir, a.file))) return null;
    try {
      let cached = filledCache.get(key);
      if (cached?.sha256 !== a.sha256) {
        cached = { sha256: a.sha256, bytes: fillBytes(readFileSync(join(dir, a.file)), urls) };
        filledCache.set(key, cached);
      }
      return { file: a.file, bytes: cached.bytes };
    } catch (err) {
      logger.warn(
        { err, file: a.file },
        'client releases: an artifact could not be filled in for this service; serving it as built',
      );
      return null;
    }
  };

  /**
   * The release as served: URLs absolute, and the skill and the client tarballs filled for this
   * service, with the hash and size of what is served (so `latest.json`, SHA256SUMS and the
   * download agree). Read per request: a release built while the service runs is served without
   * a restart.
   */
  const served = (): { manifest: ReleaseManifest; filled: Map<string, Buffer> } | null => {
    let m: ReleaseManifest;
    try {
      m = JSON.parse(readFileSync(manifestPath, 'utf8')) as ReleaseManifest;
    } catch {
      return null;
    }
    const filled = new Map<string, Buffer>();
    const artifacts = Object.fromEntries(
      Object.entries(m.artifacts).map(([k, a]) => {
        const f = fill(k, a);
        if (f) filled.set(f.file, f.bytes);
        const sized = f ? { sha256: createHash('sha256').update(f.bytes).digest('hex'), size: f.bytes.length } : {};
        return [k, { ...a, ...sized, url: new URL(a.url, `${releasesUrl}/`).toString() }];
      }),
    );
    return { manifest: { ...m, artifacts }, filled };
  };
  const notFound = (req: Request, res: Response, what: string) =>
    res.status(404).json(errorEnvelope(req.requestId, 'NOT_FOUND', what));

  router.get(`${prefix}/${MANIFEST_FILE}`, (req, res) => {
    const s = served();
    if (!s) return void notFound(req, res, 'No client release has been published on this service yet.');
    res.set('Cache-Control', 'no-cache').set('Access-Control-Allow-Origin', '*').json(s.manifest);
  });

  router.get(`${prefix}/:file`, (req, res) => {
    const file = String(req.params.file);
    const s = served();
    const listed = file === CHECKSUMS_FILE || Object.values(s?.manifest.artifacts ?? {}).some((a) => a.file === file);
    if (!s || !listed || !existsSync(join(dir, file)))
      return void notFound(req, res, `No released file named ${file}.`);
    const type = CONTENT_TYPES[file.slice(file.lastIndexOf('.'))] ?? 'text/plain; charset=utf-8';
    res.set('Content-Type', type).set('Cache-Control', 'public, max-age=300');
    if (file === CHECKSUMS_FILE)
      return void res.send(
        Object.values(s.manifest.artifacts)
          .map((a) => `${a.sha256}  ${a.file}\n`)
          .join(''),
      );
    const filled = s.filled.get(file);
    if (filled) return void res.send(filled);
    res.sendFile(file, { root: dir, dotfiles: 'deny', headers: { 'Content-Type': type } });
  });
  return router;
}
