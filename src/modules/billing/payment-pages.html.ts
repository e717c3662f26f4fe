/** Plain server-rendered pages for humans paying: no scripts, no external assets. */
import { isConnectionError } from '../../db/connection-errors.js';
import { AppError } from '../../errors/app-error.js';

export interface PageOptions {
  title: string;
  /** Already-escaped HTML of the page body, below the heading. */
  body: string;
  /** Marks the development payment page so nobody mistakes it for a real one. */
  devBanner?: boolean;
  /** Reload after this many seconds (while a payment is being confirmed). */
  refreshSeconds?: number;
  /** Where the refresh goes (a same-site path); the page itself when absent. */
  refreshUrl?: string;
}

const CSS = `
:root{color-scheme:light dark;--fg:#1a1a1a;--bg:#fafafa;--card:#fff;--muted:#555;--accent:#0b57d0;--border:#d0d0d0;--warn-bg:#fff4d6;--warn-fg:#5c4300}
@media (prefers-color-scheme:dark){:root{--fg:#eee;--bg:#121212;--card:#1e1e1e;--muted:#bbb;--accent:#8ab4f8;--border:#444;--warn-bg:#3d3200;--warn-fg:#ffe08a}}
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:34rem;margin:3rem auto;padding:2rem;background:var(--card);border:1px solid var(--border);border-radius:8px}
h1{font-size:1.5rem;margin:0 0 1rem}
p{margin:0 0 1rem}
.muted{color:var(--muted);font-size:.9rem}
.banner{background:var(--warn-bg);color:var(--warn-fg);padding:.75rem 1rem;border-radius:6px;font-weight:600}
.amount{font-size:2rem;font-weight:700;margin:.5rem 0 1rem}
dl{display:grid;grid-template-columns:auto 1fr;gap:.25rem 1rem;margin:0 0 1.5rem}
dt{color:var(--muted)}dd{margin:0;word-break:break-all}
button{font:inherit;font-weight:600;padding:.75rem 1.5rem;border:0;border-radius:6px;background:var(--accent);color:#fff;cursor:pointer}
@media (prefers-color-scheme:dark){button{color:#111}}
button:focus-visible,a:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
a{color:var(--accent)}
.actions{display:flex;gap:1.5rem;align-items:center;flex-wrap:wrap}
`;

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

export function renderPage(o: PageOptions): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
${o.refreshSeconds ? `<meta http-equiv="refresh" content="${o.refreshSeconds}${o.refreshUrl ? `; url=${escapeHtml(o.refreshUrl)}` : ''}">\n` : ''}<title>${escapeHtml(o.title)}</title>
<style>${CSS}</style>
</head>
<body>
<main>
${o.devBanner ? '<p class="banner" role="note">Development payment page. No card is charged and no money moves; paying here only simulates a successful card payment.</p>\n' : ''}<h1>${escapeHtml(o.title)}</h1>
${o.body}
</main>
</body>
</html>`;
}

/**
 * A page that carries the browser on to `next` (a same-site path) by itself, after a form's POST:
 * a GET navigation rather than a redirect of the POST, since what follows may redirect to another
 * site, which the pages' form-action policy would refuse to follow.
 */
export function continuePage(title: string, said: string, next: string): string {
  return renderPage({
    title,
    refreshSeconds: 1,
    refreshUrl: next,
    body: `<p>${said} Returning you to the app that asked…</p><p><a href="${escapeHtml(next)}">Continue</a></p>`,
  });
}

/** Headers for every payment page: no framing, no caching, no referrer, nothing but inline styles. */
export const PAGE_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'Cache-Control': 'no-store',
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
};

/** How long a page that could not reach the database or payment provider asks the browser to wait. */
export const PAGE_RETRY_AFTER_SECONDS = 30;

/** A page to send: status, extra headers and the HTML. */
export interface FailurePage {
  status: 503 | 500;
  headers: Record<string, string>;
  html: string;
}

/**
 * The page for an error a page handler did not expect. The database or payment provider being
 * unreachable is a 503 with Retry-After, as the API answers it; anything else is our fault (500).
 * `reassurance` is one already-escaped sentence saying what the failure did not do.
 */
export function failurePage(err: unknown, requestId: string, reassurance: string): FailurePage {
  const quote = `quote request <code>${escapeHtml(requestId)}</code>`;
  if (isConnectionError(err) || (err instanceof AppError && err.code === 'UNAVAILABLE')) {
    return {
      status: 503,
      headers: { 'Retry-After': String(PAGE_RETRY_AFTER_SECONDS) },
      html: renderPage({
        title: 'Temporarily unavailable',
        body: `<p>This page cannot be shown right now because part of our service is unreachable. ${reassurance}</p><p>Please try again in a minute; if it keeps failing, ${quote}.</p>`,
      }),
    };
  }
  return {
    status: 500,
    headers: {},
    html: renderPage({
      title: 'Something went wrong',
      body: `<p>Something went wrong on our side. ${reassurance} Please try again; if it keeps failing, ${quote}.</p>`,
    }),
  };
}
