import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/logger.js';

describe('structured logs', () => {
  it('redacts credential fields and respects LOG_LEVEL', () => {
    const out: string[] = [];
    const stream = new Writable({
      write(chunk, _e, cb) {
        out.push(String(chunk));
        cb();
      },
    });
    const logger = createLogger('warn', stream);
    logger.info({ x: 1 }, 'hidden at warn');
    logger.warn({ token: 'gpr_AAAAAAAA.secret', body: { setupCode: 'gps_x', privateKey: 'k' } }, 'shown');
    assert.equal(out.length, 1);
    assert.doesNotMatch(out[0], /gpr_AAAA|gps_x|"k"/);
    assert.match(out[0], /\[redacted\]/);
  });
});
