import assert from 'node:assert/strict';
import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import type { AccountsRepository } from '../../src/modules/accounts/accounts.repository.js';
import type { NewNotification } from '../../src/modules/notifications/notifications.repository.js';
import type { Conversation } from '../../src/modules/telegram/conversations.repository.js';
import type { TelegramRepository } from '../../src/modules/telegram/telegram.repository.js';
import { newAccount, newKey } from './accounts.contract.js';

export type TelegramStore = Store<{ telegram: TelegramRepository; accounts: AccountsRepository }>;

const T0 = new Date('2026-03-02T10:00:00.500Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const MINUTE = 60_000;

/**
 * What every store's Telegram repository does (and the reads of accounts and keys that owners'
 * notifications make), run on MariaDB (test/store/) and on the memory store (test/unit/). Each
 * test works in an account and chats of its own; a notification it leaves pending is marked sent
 * after it, so nothing of another test file delivers it.
 */
export function telegramContract(kind: string, make: () => Promise<TelegramStore>): void {
  describe(`telegram repository (${kind})`, () => {
    let store: TelegramStore;
    let accountId: string;
    let chatId: number;
    let recorded: string[];
    before(async () => (store = await make()));
    beforeEach(async () => {
      chatId = randomInt(1, 2 ** 47);
      const a = newAccount({ telegramChatId: chatId });
      accountId = a.id;
      recorded = [];
      await store.transaction((r) => r.accounts.insert(a));
    });
    afterEach(async () => {
      for (const id of recorded) await store.read((r) => r.telegram.notifications.markSent(id, T0));
    });

    describe('conversations', () => {
      const dialogue = (o: Partial<Conversation> = {}): Conversation => ({
        chatId,
        accountId,
        kind: 'newagent',
        step: 'perRental',
        data: { nonce: randomBytes(6).toString('base64url'), name: 'gpu bot' },
        expiresAt: at(10 * MINUTE),
        ...o,
      });
      const get = () => store.read((r) => r.telegram.conversations.get(chatId));

      it('keeps one dialogue per chat: the latest saved, expired or not, until it is deleted', async () => {
        assert.equal(await get(), null);
        const first = dialogue();
        await store.read((r) => r.telegram.conversations.save(first, T0));
        assert.deepEqual(await get(), first);
        const second = dialogue({ kind: 'approve', step: 'confirm', expiresAt: at(-MINUTE), data: { nonce: 'n2' } });
        await store.read((r) => r.telegram.conversations.save(second, T0));
        assert.deepEqual(await get(), second, 'replaced, and read back though expired');
        await store.read((r) => r.telegram.conversations.delete(chatId));
        assert.equal(await get(), null);
        await store.read((r) => r.telegram.conversations.delete(chatId));
      });

      it('moves a dialogue on from a step once: not from another step, another dialogue, or once expired', async () => {
        const c = dialogue();
        await store.read((r) => r.telegram.conversations.save(c, T0));
        const next = {
          ...c,
          step: 'budget' as const,
          data: { ...c.data, maxPerRentalMinor: 500 },
          expiresAt: at(20 * MINUTE),
        };
        const advance = (d: Conversation, from: Conversation['step'], now = at(MINUTE)) =>
          store.read((r) => r.telegram.conversations.advance(d, from, now));
        assert.equal(await advance({ ...next, data: { ...next.data, nonce: 'other' } }, 'perRental'), false);
        assert.equal(await advance(next, 'perRental', at(10 * MINUTE)), false, 'expired at that moment');
        assert.equal(await advance(next, 'perRental'), true);
        assert.equal(await advance(next, 'perRental'), false, 'the second press finds it moved');
        assert.deepEqual(await get(), next);
      });

      it('ends a dialogue at a step for exactly one caller', async () => {
        const c = dialogue({ step: 'confirm' });
        await store.read((r) => r.telegram.conversations.save(c, T0));
        const take = (d: Conversation, step: Conversation['step'], now = at(MINUTE)) =>
          store.read((r) => r.telegram.conversations.take(d, step, now));
        assert.equal(await take(c, 'budget'), false);
        assert.equal(await take({ ...c, data: { nonce: 'other' } }, 'confirm'), false);
        assert.equal(await take(c, 'confirm', at(11 * MINUTE)), false, 'expired');
        assert.notEqual(await get(), null);
        assert.equal(await take(c, 'confirm'), true);
        assert.equal(await take(c, 'confirm'), false);
        assert.equal(await get(), null);
      });
    });

    describe('notifications', () => {
      const notification = (o: Partial<NewNotification> = {}): NewNotification => ({
        key: `contract:${randomUUID()}`,
        kind: 'rental.active',
        accountId,
        chatId,
        text: 'Your rental is active.',
        ...o,
      });
      const record = (n: NewNotification) =>
        store.transaction(async (r) => {
          const id = await r.telegram.notifications.record(n, T0);
          if (id !== null) recorded.push(id);
          return id;
        });

      it('records a cause once: the first gets an id, the same cause again none', async () => {
        const n = notification();
        const id = await record(n);
        assert.match(id ?? '', /^\d+$/);
        assert.equal(await record({ ...n, text: 'again' }), null);
        assert.deepEqual(await store.read((r) => r.telegram.notifications.pending(id!)), {
          chatId,
          text: n.text,
          attempts: 0,
        });
      });

      it('records a cause turned off as given up on, so meeting it again sends nothing', async () => {
        const n = notification();
        await store.transaction((r) => r.telegram.notifications.recordSkipped(n, T0));
        assert.equal(await record(n), null);
        await store.transaction((r) => r.telegram.notifications.recordSkipped(n, T0));
      });

      it('counts tries, and is no longer pending once sent or given up on', async () => {
        const sent = (await record(notification()))!;
        const given = (await record(notification()))!;
        const pending = (id: string) => store.read((r) => r.telegram.notifications.pending(id));
        await store.read((r) => r.telegram.notifications.startAttempt(sent, at(1)));
        await store.read((r) => r.telegram.notifications.markFailedAttempt(sent, 'timeout', null));
        assert.equal((await pending(sent))?.attempts, 1, 'a failure that may pass leaves it pending');
        await store.read((r) => r.telegram.notifications.startAttempt(sent, at(2)));
        assert.equal((await pending(sent))?.attempts, 2);
        await store.read((r) => r.telegram.notifications.markSent(sent, at(3)));
        assert.equal(await pending(sent), null);
        await store.read((r) => r.telegram.notifications.markFailedAttempt(given, 'x'.repeat(300), at(4)));
        assert.equal(await pending(given), null);
        assert.equal(await pending('999999999999'), null);
      });
    });

    describe('notify preferences', () => {
      it("keeps each chat's latest choice; a chat that never chose is absent", async () => {
        const other = randomInt(1, 2 ** 47);
        const chosen = (ids: number[]) => store.read((r) => r.telegram.preferences.chosen(ids));
        assert.deepEqual(await chosen([chatId, other]), new Map());
        await store.read((r) =>
          r.telegram.preferences.save(chatId, { on: ['rental.active', 'topup.paid'], off: ['credits.low'] }, T0),
        );
        await store.read((r) =>
          r.telegram.preferences.save(chatId, { on: ['rental.failed'], off: ['rental.active'] }, at(1)),
        );
        assert.deepEqual(
          await chosen([chatId, other]),
          new Map([[chatId, { on: ['rental.failed'], off: ['rental.active'] }]]),
        );
        assert.deepEqual(await chosen([]), new Map());
      });
    });

    describe('what notifications read of accounts and keys', () => {
      it('finds the chat of each account that has one', async () => {
        const without = newAccount();
        await store.transaction((r) => r.accounts.insert(without));
        const chats = await store.read((r) =>
          r.accounts.telegramChatsOf([accountId, without.id, accountId, randomUUID()]),
        );
        assert.deepEqual(chats, new Map([[accountId, chatId]]));
        assert.deepEqual(await store.read((r) => r.accounts.telegramChatsOf([])), new Map());
      });

      it('names each key that exists, revoked or not', async () => {
        const key = newKey(accountId, { name: 'trainer', kind: 'AGENT' });
        const gone = newKey(accountId, { name: 'old', kind: 'OWNER', revokedAt: T0 });
        await store.transaction(async (r) => {
          await r.accounts.keys.insert(key);
          await r.accounts.keys.insert(gone);
        });
        const labels = await store.read((r) => r.accounts.keyLabelsOf([key.id, gone.id, randomUUID()]));
        assert.deepEqual(
          labels,
          new Map([
            [key.id, { name: 'trainer', prefix: key.prefix, kind: 'AGENT' }],
            [gone.id, { name: 'old', prefix: gone.prefix, kind: 'OWNER' }],
          ]),
        );
        assert.deepEqual(await store.read((r) => r.accounts.keyLabelsOf([])), new Map());
      });
    });
  });
}
