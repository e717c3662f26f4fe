import { randomBytes } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import type { Conversation, LimitStep } from './conversations.repository.js';
import type { TelegramRepository } from './telegram.repository.js';

export type { Conversation, ConversationData, ConversationKind, LimitStep } from './conversations.repository.js';

/**
 * One open dialogue per chat, kept in MySQL so a question asked before a restart (or answered
 * through another webhook process) is still understood afterwards.
 */
export class ConversationStore {
  constructor(
    private readonly store: Store<{ telegram: TelegramRepository }>,
    private readonly clock: Clock,
  ) {}

  static nonce(): string {
    return randomBytes(6).toString('base64url');
  }

  /** The chat's open dialogue, or null when there is none or it has expired. */
  async get(chatId: number): Promise<Conversation | null> {
    const c = await this.store.read((r) => r.telegram.conversations.get(chatId));
    if (!c) return null;
    if (c.expiresAt.getTime() <= this.clock.now().getTime()) {
      await this.clear(chatId);
      return null;
    }
    return c;
  }

  /** Starts or replaces the chat's dialogue. */
  async save(c: Conversation): Promise<void> {
    await this.store.read((r) => r.telegram.conversations.save(c, this.clock.now()));
  }

  /**
   * Moves the dialogue on from `fromStep` only if it is still there, so two presses of one button
   * (or two webhook processes racing) advance it once. False when someone else got there first.
   */
  async advance(c: Conversation, fromStep: LimitStep): Promise<boolean> {
    return this.store.read((r) => r.telegram.conversations.advance(c, fromStep, this.clock.now()));
  }

  /** Ends the dialogue if it is still at `step`; true for exactly one caller. */
  async take(c: Conversation, step: LimitStep): Promise<boolean> {
    return this.store.read((r) => r.telegram.conversations.take(c, step, this.clock.now()));
  }

  async clear(chatId: number): Promise<void> {
    await this.store.read((r) => r.telegram.conversations.delete(chatId));
  }
}
