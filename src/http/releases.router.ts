import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Router, type Request, type Response } from 'express';
import type { Config } from '../config.js';
import { errorEnvelope } from '../errors/envelope.js';
import type { Logger } from '../logger.js';

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

/**
 * Serves the client releases built by `npm run release` when RELEASES_URL points at this service
 * (by default `${PUBLIC_BASE_URL}/releases`); elsewhere they are hosted by someone else and this
 * router is empty. Only files the manifest lists (and SHA256SUMS) are served.
 */
export function releasesRouter(config: Pick<Config, 'publicBaseUrl' | 'releasesUrl' | 'releasesDir'>, logger: Logger): Router {
  const router = Router();
  const base = `${config.publicBaseUrl}/`;
  if (!config.releasesUrl.startsWith(base)) return router;
  const prefix = new URL(config.releasesUrl).pathname.replace(/\/+$/, '');
  const dir = config.releasesDir;
  const manifestPath = join(dir, MANIFEST_FILE);
  if (existsSync(manifestPath)) logger.info({ dir, url: config.releasesUrl }, `client releases served at ${config.releasesUrl}/${MANIFEST_FILE}`);
  else logger.warn({ dir }, `client releases: none built in ${dir}; ${prefix}/${MANIFEST_FILE} answers 404 until \`npm run release\` runs`);

  // Read per request: a release built while the service runs is served without a restart.
  const manifest = (): ReleaseManifest | null => {
    try {
      return JSON.parse(readFileSync(manifestPath, 'utf8')) as ReleaseManifest;
    } catch {
      return null;
    }
  };
  const notFound = (req: Request, res: Response, what: string) =>
    res.status(404).json(errorEnvelope(req.requestId, 'NOT_FOUND', what));

  router.get(`${prefix}/${MANIFEST_FILE}`, (req, res) => {
    const m = manifest();
    if (!m) return void notFound(req, res, 'No client release has been published on this service yet.');
    const artifacts = Object.fromEntries(
      Object.entries(m.artifacts).map(([k, a]) => [k, { ...a, url: new URL(a.url, `${config.releasesUrl}/`).toString() }]),
    );
    res.set('Cache-Control', 'no-cache').set('Access-Control-Allow-Origin', '*').json({ ...m, artifacts });
  });

  router.get(`${prefix}/:file`, (req, res) => {
    const file = String(req.params.file);
    const m = manifest();
    const listed = file === CHECKSUMS_FILE || Object.values(m?.artifacts ?? {}).some((a) => a.file === file);
    if (!m || !listed || !existsSync(join(dir, file))) return void notFound(req, res, `No released file named ${file}.`);
    const type = CONTENT_TYPES[file.slice(file.lastIndexOf('.'))] ?? 'text/plain; charset=utf-8';
    res.set('Content-Type', type).set('Cache-Control', 'public, max-age=300');
    res.sendFile(file, { root: dir, dotfiles: 'deny', headers: { 'Content-Type': type } });
  });
  return router;
}
