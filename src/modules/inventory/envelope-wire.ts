import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { API_VERSION } from '../../errors/envelope.js';

const deflateRaw = promisify(zlib.deflateRaw);
const brotliCompress = promisify(zlib.brotliCompress);

/** Content codings a serialised envelope is kept in. */
export type WireEncoding = 'identity' | 'gzip' | 'br';

/** Below this, compression saves too little to be worth a second and third copy. */
export const COMPRESS_MIN_BYTES = 1024;

/**
 * Brotli quality for precompressed bodies: 5 compresses a 1 MB snapshot in tens of milliseconds
 * (off the event loop) and beats gzip -9 on our JSON; 11 would take seconds on every refresh.
 */
const BROTLI_QUALITY = 5;

// gzip member header (RFC 1952): deflate, no flags, no mtime, OS unknown.
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff]);

/** The precompressed head of a body: everything but the per-request tail, still open. */
export interface CompressedHead {
  gzip: Buffer;
  br: Buffer;
}

/**
 * One success envelope `{"data":…,"meta":{"requestId":…,"apiVersion":"v1"}}` serialised once:
 * the bytes before and after the request id, and compressed forms whose per-request part is a
 * few bytes long. Byte for byte what `res.json(envelope(req, data))` sends.
 *
 * Compression without recompressing: the head (`{"data":…,"meta":{"requestId":`) is compressed
 * once and flushed to a byte boundary without ending the stream; each response then appends the
 * request id and the rest as one *stored* (uncompressed) block that ends the stream. For gzip
 * that is a deflate stored block plus the trailer, whose CRC-32 continues the head's; for brotli
 * an uncompressed meta-block and an empty last one. Either way it is a single ordinary stream
 * (not concatenated gzip members, which some clients stop reading after the first).
 */
export class EnvelopeWire {
  /** Weak ETag over the body without the request id. */
  readonly etag: string;
  readonly head: Buffer;
  readonly tail: string;
  private readonly headCrc: number;
  private compressed?: Promise<CompressedHead | undefined>;
  /** Set once `prepare()` has finished: what it resolved to, readable without waiting. */
  prepared?: { compressed: CompressedHead | undefined };

  constructor(data: unknown, etagSeed: string) {
    this.head = Buffer.from(`{"data":${JSON.stringify(data)},"meta":{"requestId":`);
    this.tail = `,"apiVersion":${JSON.stringify(API_VERSION)}}}`;
    this.headCrc = zlib.crc32(this.head);
    const hash = createHash('sha1')
      .update(etagSeed)
      .update(this.head)
      .update(this.tail)
      .digest('base64url')
      .slice(0, 16);
    this.etag = `W/"${hash}"`;
  }

  /** Compresses the head (once, in the thread pool); undefined for bodies too small to bother. */
  prepare(): Promise<CompressedHead | undefined> {
    this.compressed ??=
      this.head.length < COMPRESS_MIN_BYTES
        ? Promise.resolve(undefined)
        : (async () => {
            const [deflated, br] = await Promise.all([
              deflateRaw(this.head, { level: 6, finishFlush: zlib.constants.Z_SYNC_FLUSH }),
              brotliCompress(this.head, {
                finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH,
                params: {
                  [zlib.constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
                  [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
                  [zlib.constants.BROTLI_PARAM_SIZE_HINT]: this.head.length,
                },
              }),
            ]);
            return { gzip: Buffer.concat([GZIP_HEADER, deflated]), br };
          })();
    void this.compressed.then(
      (compressed) => (this.prepared = { compressed }),
      () => undefined,
    );
    return this.compressed;
  }

  /** The response body for one request id, as a list of buffers to write in order. */
  body(requestId: string, encoding: WireEncoding, compressed: CompressedHead | undefined): Buffer[] {
    const end = Buffer.from(`${JSON.stringify(requestId)}${this.tail}`);
    if (encoding === 'gzip' && compressed) return [compressed.gzip, this.gzipEnd(end)];
    if (encoding === 'br' && compressed) return [compressed.br, brotliEnd(end)];
    return [this.head, end];
  }

  /** A final deflate stored block holding `end`, then the gzip trailer for head + end. */
  private gzipEnd(end: Buffer): Buffer {
    const out = Buffer.allocUnsafe(5 + end.length + 8);
    out[0] = 0x01; // BFINAL=1, BTYPE=00 (stored); the rest of the byte is padding
    out.writeUInt16LE(end.length, 1);
    out.writeUInt16LE(~end.length & 0xffff, 3);
    end.copy(out, 5);
    out.writeUInt32LE(zlib.crc32(end, this.headCrc), 5 + end.length);
    out.writeUInt32LE((this.head.length + end.length) >>> 0, 9 + end.length);
    return out;
  }
}

/**
 * An uncompressed brotli meta-block holding `end` (RFC 7932 §9.2: ISLAST=0, MNIBBLES=4,
 * MLEN-1 in 16 bits, ISUNCOMPRESSED=1, zero padding to the byte), then an empty last meta-block.
 */
function brotliEnd(end: Buffer): Buffer {
  const out = Buffer.allocUnsafe(3 + end.length + 1);
  const header = ((end.length - 1) << 3) | (1 << 19);
  out[0] = header & 0xff;
  out[1] = (header >>> 8) & 0xff;
  out[2] = (header >>> 16) & 0xff;
  end.copy(out, 3);
  out[3 + end.length] = 0x03; // ISLAST=1, ISLASTEMPTY=1
  return out;
}
