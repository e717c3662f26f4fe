/*
 * The baseline of `npm run bench:http`, run as its own process like the service: Express 5 with
 * nothing but a handler per path that replays what the real app sent (its headers, security and
 * CORS ones included, and its body; the request id is the captured one). Plain JavaScript run by
 * node, so no compiler's loader weighs on its memory.
 *
 *   node --expose-gc --import ./bench/child-probe.mjs bench/bare-express.mjs <forms.json>
 *
 * <forms.json>: { "<path>": { identity, gzip, notModified } }, each { headers, body (base64) }.
 * Prints the port it listens on (loopback) as its first line.
 */
import { readFileSync } from 'node:fs';
import express from 'express';

const routes = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const app = express();
app.set('etag', false);
app.disable('x-powered-by');
for (const [path, forms] of Object.entries(routes)) {
  const body = (form) => ({ headers: form.headers, body: Buffer.from(form.body, 'base64') });
  const identity = body(forms.identity);
  const gzip = body(forms.gzip);
  const notModified = forms.notModified.headers;
  app.get(path, (req, res) => {
    if (req.headers['if-none-match'] === identity.headers.etag) return void res.status(304).set(notModified).end();
    const form = /\bgzip\b/.test(req.headers['accept-encoding'] ?? '') ? gzip : identity;
    res.set(form.headers).send(form.body);
  });
}
const server = app.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
