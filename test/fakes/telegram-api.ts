/* eslint-disable @typescript-eslint/no-explicit-any -- Bot API parameters and replies are loose JSON, as they come off the wire. */
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Message, Update, User } from 'grammy/types';
import { withTimeout } from '../helpers/wait.js';
import { afterSimulatedLatency } from './simulated-latency.js';

/** One Bot API call the bot made, as the fake received it. */
export interface RecordedCall {
  method: string;
  params: Record<string, any>;
  /** What the fake answered: the `result`, or the error description. */
  ok: boolean;
  result?: unknown;
  /** Monotonic sequence number, for "calls after this point" queries. */
  seq: number;
}

export interface FakeTelegramOptions {
  /** The only bot token accepted; any other gets Telegram's 401. */
  token: string;
  username?: string;
  /** Upper bound on how long a getUpdates call is held open, whatever timeout the bot asks for. */
  maxLongPollMs?: number;
}

type Reply = { status: number; body: unknown };

interface Waiter {
  offset: number;
  limit: number;
  resolve: () => void;
}

interface WebhookState {
  url: string;
  secretToken?: string;
}

/**
 * A local stand-in for the Telegram Bot API, spoken to by grammY's own client (`apiRoot`).
 * It answers the methods the owner bot uses with Telegram-shaped results and errors, keeps
 * getUpdates semantics (offset confirms, long polling up to `timeout`, 409 while a webhook is
 * set), delivers updates to a webhook URL with the secret token header when one is set, and
 * records every call so tests can read what the bot "said". Tests act as Telegram users by
 * injecting updates through `user(...)`.
 */
export class FakeTelegramServer {
  readonly calls: RecordedCall[] = [];
  readonly bot: User;
  url = '';
  /** Chats whose sendMessage answers 403 "bot was blocked by the user". */
  readonly blockedChats = new Set<number>();
  /** Deliveries to the webhook: the status the bot's server answered. */
  readonly webhookDeliveries: { updateId: number; status: number }[] = [];
  webhook: WebhookState | null = null;
  commands: unknown[] = [];

  private server!: Server;
  private readonly queue: Update[] = [];
  private nextUpdateId = 1000;
  private nextMessageId = 1;
  private seq = 0;
  private waiters: Waiter[] = [];
  private callListeners: (() => void)[] = [];
  private readonly maxLongPollMs: number;

  private constructor(private readonly options: FakeTelegramOptions) {
    this.bot = {
      id: 7_000_000_001,
      is_bot: true,
      first_name: 'GPU Rental',
      username: options.username ?? 'gpu_rental_test_bot',
    };
    this.maxLongPollMs = options.maxLongPollMs ?? 2000;
  }

  static async start(options: FakeTelegramOptions): Promise<FakeTelegramServer> {
    const fake = new FakeTelegramServer(options);
    fake.server = createServer((req, res) => void fake.handle(req, res));
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    fake.url = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
    return fake;
  }

  async close(): Promise<void> {
    for (const w of this.waiters) w.resolve();
    this.waiters = [];
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  /** A simulated Telegram user in a private chat with the bot (chat id = user id). */
  user(id: number, firstName = 'Owner'): SimulatedUser {
    return new SimulatedUser(this, { id, is_bot: false, first_name: firstName, username: `user${id}` });
  }

  /** Updates not yet confirmed by an offset (long polling) or delivered (webhook). */
  get pendingUpdates(): number {
    return this.queue.length;
  }

  /**
   * Hands an update to the bot: queued for getUpdates, or POSTed to the webhook when one is set.
   * Resolves once queued (polling) or once the bot's server answered (webhook).
   */
  async inject(partial: Omit<Update, 'update_id'>): Promise<Update> {
    const update = { update_id: this.nextUpdateId++, ...partial } as Update;
    if (this.webhook) {
      const status = await this.post(this.webhook, update);
      this.webhookDeliveries.push({ updateId: update.update_id, status });
      return update;
    }
    this.queue.push(update);
    this.wake();
    return update;
  }

  /** Numbers an update without queuing it, for tests that hand it to `bot.handleUpdate` themselves. */
  makeUpdate(partial: Omit<Update, 'update_id'>): Update {
    return { update_id: this.nextUpdateId++, ...partial } as Update;
  }

  newMessageId(): number {
    return this.nextMessageId++;
  }

  /** Sequence number of the last recorded call (0 before any). */
  mark(): number {
    return this.seq;
  }

  callsSince(mark: number, method?: string): RecordedCall[] {
    return this.calls.filter((c) => c.seq > mark && (!method || c.method === method));
  }

  /** Waits until a call after `mark` satisfies `match`; rejects after `timeoutMs`. */
  waitForCall(match: (c: RecordedCall) => boolean, mark = 0, timeoutMs = 5000): Promise<RecordedCall> {
    const hit = () => this.calls.find((c) => c.seq > mark && match(c));
    let listener: (() => void) | undefined;
    const found = new Promise<RecordedCall>((resolve) => {
      const check = () => {
        const call = hit();
        if (call) resolve(call);
      };
      listener = check;
      this.callListeners.push(listener);
      check();
    });
    return withTimeout(found, {
      timeoutMs,
      what: () =>
        `a matching Bot API call; calls since mark: ${JSON.stringify(this.callsSince(mark).map((c) => [c.method, c.params.text ?? c.params]))}`,
    }).finally(() => {
      this.callListeners = this.callListeners.filter((l) => l !== listener);
    });
  }

  private record(method: string, params: Record<string, any>, reply: Reply): void {
    const body = reply.body as { ok: boolean; result?: unknown; description?: string };
    this.calls.push({ method, params, ok: body.ok, result: body.ok ? body.result : body.description, seq: ++this.seq });
    for (const l of [...this.callListeners]) l();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.resolve();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const m = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(url.pathname);
    let raw = '';
    for await (const chunk of req) raw += chunk;
    if (!m) return send(res, { status: 404, body: { ok: false, error_code: 404, description: 'Not Found' } });
    const [, token, method] = m;
    if (token !== this.options.token)
      return send(res, { status: 401, body: { ok: false, error_code: 401, description: 'Unauthorized' } });
    let params: Record<string, any> = Object.fromEntries(url.searchParams);
    if (raw) {
      try {
        params = { ...params, ...JSON.parse(raw) };
      } catch {
        return send(res, error(400, "Bad Request: can't parse JSON"));
      }
    }
    if (method === 'getUpdates') {
      const reply = await this.getUpdates(params, req);
      // Polling calls are not recorded: they would drown what the bot said.
      return send(res, reply);
    }
    const reply = this.dispatch(method, params);
    this.record(method, params, reply);
    send(res, reply);
  }

  private async getUpdates(params: Record<string, any>, req: IncomingMessage): Promise<Reply> {
    if (this.webhook)
      return error(
        409,
        "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
      );
    const offset = Number(params.offset ?? 0);
    const limit = Math.min(100, Math.max(1, Number(params.limit ?? 100)));
    const timeoutMs = Math.min(Number(params.timeout ?? 0) * 1000, this.maxLongPollMs);
    // An offset confirms every update below it: Telegram forgets them.
    if (offset > 0) while (this.queue.length && this.queue[0].update_id < offset) this.queue.shift();
    if (this.queue.length === 0 && timeoutMs > 0) {
      await new Promise<void>((resolve) => {
        const waiter: Waiter = { offset, limit, resolve };
        // Telegram holds the poll open until an update comes or its timeout runs out.
        const timer = afterSimulatedLatency(timeoutMs, () => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          resolve();
        });
        waiter.resolve = () => {
          clearTimeout(timer);
          resolve();
        };
        this.waiters.push(waiter);
        req.on('close', () => waiter.resolve());
      });
    }
    return ok(this.queue.filter((u) => u.update_id >= offset).slice(0, limit));
  }

  private dispatch(method: string, p: Record<string, any>): Reply {
    switch (method) {
      case 'getMe':
        return ok(this.bot);
      case 'sendMessage': {
        if (!p.chat_id) return error(400, 'Bad Request: chat_id is empty');
        if (typeof p.text !== 'string' || p.text.length === 0) return error(400, 'Bad Request: message text is empty');
        if (p.text.length > 4096) return error(400, 'Bad Request: message is too long');
        const chatId = Number(p.chat_id);
        if (this.blockedChats.has(chatId)) return error(403, 'Forbidden: bot was blocked by the user');
        const bad = checkReplyMarkup(p.reply_markup);
        if (bad) return error(400, bad);
        const text = renderText(p.text, p.parse_mode);
        if (text === null)
          return error(400, "Bad Request: can't parse entities: unsupported start tag or unescaped character");
        const message = {
          message_id: this.newMessageId(),
          date: Math.floor(Date.now() / 1000),
          chat: { id: chatId, type: chatId > 0 ? 'private' : 'group' },
          from: this.bot,
          text,
          ...(p.reply_markup ? { reply_markup: p.reply_markup } : {}),
        };
        return ok(message);
      }
      case 'editMessageText': {
        if (typeof p.text !== 'string' || p.text.length === 0) return error(400, 'Bad Request: message text is empty');
        const bad = checkReplyMarkup(p.reply_markup);
        if (bad) return error(400, bad);
        const original = this.findSent(Number(p.chat_id), Number(p.message_id));
        if (!original) return error(400, 'Bad Request: message to edit not found');
        const text = renderText(p.text, p.parse_mode);
        if (text === null)
          return error(400, "Bad Request: can't parse entities: unsupported start tag or unescaped character");
        return ok({ ...original, text, edit_date: Math.floor(Date.now() / 1000), reply_markup: p.reply_markup });
      }
      case 'editMessageReplyMarkup': {
        const original = this.findSent(Number(p.chat_id), Number(p.message_id));
        if (!original) return error(400, 'Bad Request: message to edit not found');
        return ok({ ...original, reply_markup: p.reply_markup });
      }
      case 'answerCallbackQuery':
        if (!p.callback_query_id)
          return error(400, 'Bad Request: query is too old and response timeout expired or query ID is invalid');
        return ok(true);
      case 'setWebhook':
        if (!p.url) {
          this.webhook = null;
          return ok(true);
        }
        if (p.secret_token !== undefined && !/^[A-Za-z0-9_-]{1,256}$/.test(String(p.secret_token))) {
          return error(400, 'Bad Request: secret token contains unallowed characters');
        }
        this.webhook = { url: String(p.url), secretToken: p.secret_token };
        return ok(true);
      case 'deleteWebhook':
        this.webhook = null;
        if (p.drop_pending_updates) this.queue.length = 0;
        return ok(true);
      case 'getWebhookInfo':
        return ok({
          url: this.webhook?.url ?? '',
          has_custom_certificate: false,
          pending_update_count: this.queue.length,
        });
      case 'setMyCommands':
        if (!Array.isArray(p.commands)) return error(400, 'Bad Request: commands must be an array');
        this.commands = p.commands;
        return ok(true);
      case 'deleteMyCommands':
        this.commands = [];
        return ok(true);
      case 'getMyCommands':
        return ok(this.commands);
      case 'sendChatAction':
      case 'leaveChat':
        return ok(true);
      default:
        return error(404, 'Not Found: method not found');
    }
  }

  private findSent(chatId: number, messageId: number): Message | undefined {
    for (const c of this.calls) {
      const r = c.result as Message | undefined;
      if (c.ok && c.method === 'sendMessage' && r && r.chat.id === chatId && r.message_id === messageId) return r;
    }
    return undefined;
  }

  private post(hook: WebhookState, update: Update): Promise<number> {
    const body = JSON.stringify(update);
    const target = new URL(hook.url);
    return new Promise((resolve) => {
      const req = httpRequest(
        target,
        {
          method: 'POST',
          headers: {
            'Content-Type': 'application/json',
            'Content-Length': Buffer.byteLength(body),
            ...(hook.secretToken ? { 'X-Telegram-Bot-Api-Secret-Token': hook.secretToken } : {}),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', () => resolve(0));
      req.end(body);
    });
  }
}

/** A Telegram user in a private chat with the bot, as tests drive them. */
export class SimulatedUser {
  readonly chat: { id: number; type: 'private'; first_name: string; username?: string };

  constructor(
    private readonly fake: FakeTelegramServer,
    readonly from: User,
  ) {
    this.chat = { id: from.id, type: 'private', first_name: from.first_name, username: from.username };
  }

  /** A text message update (with the bot_command entity Telegram adds to a leading /command). */
  message(text: string, chat: Record<string, unknown> = this.chat): Omit<Update, 'update_id'> {
    const cmd = /^\/[A-Za-z0-9_]+(@[A-Za-z0-9_]+)?/.exec(text);
    return {
      message: {
        message_id: this.fake.newMessageId(),
        date: Math.floor(Date.now() / 1000),
        chat: chat as any,
        from: this.from,
        text,
        ...(cmd ? { entities: [{ type: 'bot_command', offset: 0, length: cmd[0].length }] } : {}),
      },
    } as Omit<Update, 'update_id'>;
  }

  /** A button press on one of the bot's messages. */
  press(message: Message, data: string): Omit<Update, 'update_id'> {
    return {
      callback_query: {
        id: `cbq-${this.from.id}-${this.fake.newMessageId()}`,
        from: this.from,
        chat_instance: `ci-${this.from.id}`,
        message: message as any,
        data,
      },
    } as Omit<Update, 'update_id'>;
  }
}

/** Button texts and callback data of a message's inline keyboard, row by row flattened. */
export function buttonsOf(message: { reply_markup?: any }): { text: string; data?: string; url?: string }[] {
  const rows: any[][] = message.reply_markup?.inline_keyboard ?? [];
  return rows.flat().map((b) => ({ text: b.text, data: b.callback_data, url: b.url }));
}

const HTML_TAGS = new Set([
  'b',
  'strong',
  'i',
  'em',
  'u',
  'ins',
  's',
  'strike',
  'del',
  'a',
  'code',
  'pre',
  'tg-spoiler',
  'span',
  'blockquote',
]);

/**
 * The text a client shows: with parse_mode HTML, Telegram's rules (only its tags; `<`, `>` and
 * `&` outside tags must be escaped) or null where Telegram would refuse to parse.
 */
function renderText(text: string, parseMode: unknown): string | null {
  if (parseMode !== 'HTML') return text;
  let out = '';
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    if (ch === '<') {
      const m = /^<\/?([a-z-]+)(\s[^<>]*)?>/.exec(text.slice(i));
      if (!m || !HTML_TAGS.has(m[1])) return null;
      i += m[0].length;
    } else if (ch === '>') {
      return null;
    } else if (ch === '&') {
      const m = /^&(lt|gt|amp|quot|#\d+);/.exec(text.slice(i));
      if (!m) return null;
      out += { lt: '<', gt: '>', amp: '&', quot: '"' }[m[1]] ?? String.fromCharCode(Number(m[1].slice(1)));
      i += m[0].length;
    } else {
      out += ch;
      i++;
    }
  }
  return out;
}

function checkReplyMarkup(markup: any): string | null {
  if (!markup?.inline_keyboard) return null;
  for (const row of markup.inline_keyboard) {
    for (const b of row) {
      if (typeof b.text !== 'string' || b.text.length === 0)
        return 'Bad Request: text buttons are unallowed in the inline keyboard';
      if (b.callback_data !== undefined && Buffer.byteLength(String(b.callback_data)) > 64)
        return 'Bad Request: BUTTON_DATA_INVALID';
      if (b.callback_data === undefined && b.url === undefined)
        return 'Bad Request: inline keyboard button must have callback_data or url';
      if (b.url !== undefined && !/^(https?|tg):\/\//.test(String(b.url)))
        return 'Bad Request: inline keyboard button URL is invalid';
    }
  }
  return null;
}

function ok(result: unknown): Reply {
  return { status: 200, body: { ok: true, result } };
}

function error(code: number, description: string): Reply {
  return { status: code, body: { ok: false, error_code: code, description } };
}

function send(res: ServerResponse, reply: Reply): void {
  const body = JSON.stringify(reply.body);
  res.writeHead(reply.status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}
