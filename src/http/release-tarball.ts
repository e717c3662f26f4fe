import { gunzipSync, gzipSync } from 'fflate';

const BLOCK = 512;

/** The date written on an added entry, so the served bytes depend on the content only. */
const ENTRY_MTIME_SECONDS = Date.parse('2000-01-01T00:00:00Z') / 1000;

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

/** A ustar header of a regular file, mode 0644, owned by nobody in particular. */
function fileHeader(name: string, size: number): Buffer {
  if (Buffer.byteLength(name) > 100) throw new RangeError(`tar entry name too long: ${name}`);
  const h = Buffer.alloc(BLOCK);
  h.write(name, 0, 100, 'utf8');
  h.write(octal(0o644, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii');
  h.write(octal(0, 8), 116, 'ascii');
  h.write(octal(size, 12), 124, 'ascii');
  h.write(octal(ENTRY_MTIME_SECONDS, 12), 136, 'ascii');
  h.write('0', 156, 'ascii');
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  // The checksum is taken with its own field read as spaces.
  h.fill(' ', 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return h;
}

/** Where the archive's entries end: the first all-zero header block. */
function endOfEntries(tar: Uint8Array): number {
  let at = 0;
  while (at + BLOCK <= tar.length) {
    const header = tar.subarray(at, at + BLOCK);
    if (header.every((b) => b === 0)) return at;
    const size = parseInt(
      Buffer.from(header.subarray(124, 136)).toString('ascii').replace(/\0.*$/s, '').trim() || '0',
      8,
    );
    if (!Number.isFinite(size) || size < 0) throw new RangeError('not a tar archive');
    at += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
  }
  throw new RangeError('tar archive without an end');
}

/**
 * The gzipped tar `tgz` with one more file, `name`, holding `content`. Entries are read in order
 * and a later one wins, so an existing file of that name is replaced for whoever unpacks it.
 */
export function withTarEntry(tgz: Uint8Array, name: string, content: string): Buffer {
  const tar = gunzipSync(tgz);
  const end = endOfEntries(tar);
  const data = Buffer.from(content, 'utf8');
  const padded = Buffer.alloc(Math.ceil(data.length / BLOCK) * BLOCK);
  data.copy(padded);
  const out = Buffer.concat([tar.subarray(0, end), fileHeader(name, data.length), padded, Buffer.alloc(2 * BLOCK)]);
  return Buffer.from(gzipSync(out, { level: 9, mtime: 0 }));
}
