import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { SshInstanceServer } from '../../plugins/local/ssh-instance-server.js';
import { LAMBDA_REGION_CODES } from './lambda-fixtures.js';

/** One answer of the fake Lambda API: a JSON body, or a string sent as text. */
export type Reply = { status: number; body?: unknown; headers?: Record<string, string> };

/** Lambda's failure envelope `{error:{code,message,suggestion?}}`. */
export const lambdaError = (status: number, code: string, message: string, suggestion?: string): Reply => ({
  status,
  body: { error: suggestion ? { code, message, suggestion } : { code, message } },
});
export const invalid = (message: string) => lambdaError(400, 'global/invalid-parameters', message);
export const notFound = (message: string) => lambdaError(404, 'global/object-does-not-exist', message);

/** `RequestedTagEntry.key` as documented. */
const TAG_KEY = /^[a-z][a-z0-9-:]+$/;

/**
 * `user_data` "cannot exceed 1MB" by the document, which does not say which megabyte: the fake
 * takes the smaller, so a plugin that fits here fits Lambda under either reading.
 */
export const USER_DATA_MAX_BYTES = 1_000_000;

export interface LaunchRequest {
  region: string;
  typeName: string;
  keyName: string;
  name: string;
  tags: { key: string; value: string }[];
  /** The cloud-init text, when the launch carried one (write-only: never shown by a read). */
  userData?: string;
}

/** `InstanceLaunchRequest` checked as documented; a `Reply` when Lambda would refuse it as invalid. */
export function parseLaunch(body: Record<string, unknown>): LaunchRequest | Reply {
  const {
    region_name: region,
    instance_type_name: typeName,
    ssh_key_names: keyNames,
    name = '',
    tags = [],
    user_data: userData,
  } = body;
  if (typeof region !== 'string' || !LAMBDA_REGION_CODES.includes(region))
    return invalid('region_name must be a valid region code.');
  if (typeof typeName !== 'string') return invalid('instance_type_name is required.');
  if (!Array.isArray(keyNames) || keyNames.length !== 1 || typeof keyNames[0] !== 'string')
    return invalid('Exactly one SSH key must be specified.');
  if (typeof name !== 'string' || name.length > 64) return invalid('name must be 64 characters or fewer.');
  const tagOk = (t: { key?: unknown; value?: unknown }) =>
    t &&
    typeof t.key === 'string' &&
    TAG_KEY.test(t.key) &&
    t.key.length <= 55 &&
    typeof t.value === 'string' &&
    t.value.length <= 128;
  if (!Array.isArray(tags) || !tags.every(tagOk))
    return invalid('tags must be key/value pairs with keys matching ^[a-z][a-z0-9-:]+$.');
  // Field validation answers as the recorded `quantity` one does: `<field>: <what is wrong>`,
  // never quoting the value (the messages' wording is the fake's, the code and status Lambda's).
  if (userData !== undefined && typeof userData !== 'string')
    return invalid('user_data: Input should be a valid string');
  if (typeof userData === 'string' && Buffer.byteLength(userData, 'utf8') > USER_DATA_MAX_BYTES)
    return invalid('user_data: The user data cannot exceed 1MB.');
  return {
    region,
    typeName,
    keyName: keyNames[0],
    name,
    tags: tags.map((t: { key: string; value: string }) => ({ key: t.key, value: t.value })),
    ...(userData === undefined ? {} : { userData }),
  };
}

/** `AddSSHKeyRequest` checked as documented; `publicKey` undefined asks Lambda to generate a pair. */
export function parseNewKey(body: Record<string, unknown>): { name: string; publicKey?: string } | Reply {
  const { name, public_key: publicKey } = body;
  if (typeof name !== 'string' || name.length < 1 || name.length > 64)
    return invalid('name must be 1 to 64 characters.');
  if (publicKey === undefined) return { name };
  if (typeof publicKey !== 'string' || publicKey.length < 1 || publicKey.length > 4096)
    return invalid('public_key must be 1 to 4096 characters.');
  try {
    SshInstanceServer.assertPublicKey(publicKey);
  } catch {
    return invalid('Invalid public key.');
  }
  return { name, publicKey };
}

export const isReply = (v: object): v is Reply => 'status' in v;

/** The calls a test can make misbehave, named alike across the cloud fakes. */
export type FakeEndpoint = 'create' | 'get' | 'list' | 'destroy' | 'offers' | 'ssh-keys';

/** Bearer, or Basic as base64 of `key:` or the bare key: the forms Lambda documents. */
export function authorized(header: string | undefined, apiKey: string): boolean {
  if (!header) return false;
  const [scheme, value = ''] = header.split(/\s+/, 2);
  if (/^bearer$/i.test(scheme)) return value === apiKey;
  if (!/^basic$/i.test(scheme)) return false;
  if (value === apiKey) return true;
  return Buffer.from(value, 'base64').toString('utf8') === `${apiKey}:`;
}

/** Which misbehaving call a request is. */
export function endpointOf(method: string, path: string): FakeEndpoint | null {
  if (method === 'GET' && path === '/api/v1/instance-types') return 'offers';
  if (method === 'POST' && path === '/api/v1/instance-operations/launch') return 'create';
  if (method === 'POST' && path === '/api/v1/instance-operations/terminate') return 'destroy';
  if (method === 'GET' && path === '/api/v1/instances') return 'list';
  if (method === 'GET' && /^\/api\/v1\/instances\/[^/]+$/.test(path)) return 'get';
  if (path === '/api/v1/ssh-keys' || path.startsWith('/api/v1/ssh-keys/')) return 'ssh-keys';
  return null;
}

/** A port free on 127.0.0.1 now, used for every machine on its own loopback address. */
export async function freePort(): Promise<number> {
  const srv = createNetServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as AddressInfo).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}
