import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { Clock } from '../../clock.js';

export type ConversationKind = 'newagent' | 'approve';
export type LimitStep = 'perRental' | 'budget' | 'concurrent' | 'confirm';

/** Limits gathered so far (cents and a count), plus what the dialogue works on. */
export interface ConversationData {
  /** Random id printed into each button's data, so a keyboard from an older dialogue is refused. */
  nonce: string;
  maxPerRentalMinor?: number;
  budgetLimitMinor?: number;
  maxConcurrentDeployments?: number;
  name?: string;
  /** Approval dialogues: the public approval code of the authorization being approved. */
  approvalCode?: string;
}

export interface Conversation {
  chatId: number;
  accountId: string;
  kind: ConversationKind;
  step: LimitStep;
  data: ConversationData;
  expiresAt: Date;
}

/**
 * One open dialogue per chat, kept in MySQL so a question asked before a restart (or answered
 * through another webhook process) is still understood afterwards.
 */
export class ConversationStore {
  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
  ) {}

  static nonce(): string {
    return randomBytes(6).toString('base64url');
  }

  /** The chat's open dialogue, or null when there is none or it has expired. */
  async get(chatId: number): Promise<Conversation | null> {
    const rows: { account_id: string; kind: ConversationKind; step: LimitStep; data: string; expires_at: Date }[] = await this.ds.query(
      'SELECT account_id, kind, step, data, expires_at FROM telegram_conversations WHERE chat_id = ?',
      [chatId],
    );
    const row = rows[0];
    if (!row) return null;
    const expiresAt = new Date(row.expires_at);
    if (expiresAt.getTime() <= this.clock.now().getTime()) {
      await this.clear(chatId);
      return null;
    }
    return { chatId, accountId: row.account_id, kind: row.kind, step: row.step, data: JSON.parse(row.data) as ConversationData, expiresAt };
  }

  /** Starts or replaces the chat's dialogue. */
  async save(c: Conversation): Promise<void> {
    await this.ds.query(
      `INSERT INTO telegram_conversations (chat_id, account_id, kind, step, data, expires_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)
       ON DUPLICATE KEY UPDATE account_id = VALUES(account_id), kind = VALUES(kind), step = VALUES(step),
         data = VALUES(data), expires_at = VALUES(expires_at), updated_at = VALUES(updated_at)`,
      [c.chatId, c.accountId, c.kind, c.step, JSON.stringify(c.data), c.expiresAt, this.clock.now()],
    );
  }

  /**
   * Moves the dialogue on from `fromStep` only if it is still there, so two presses of one button
   * (or two webhook processes racing) advance it once. False when someone else got there first.
   */
  async advance(c: Conversation, fromStep: LimitStep): Promise<boolean> {
    const res = await this.ds.query(
      `UPDATE telegram_conversations SET step = ?, data = ?, expires_at = ?, updated_at = ?
        WHERE chat_id = ? AND step = ? AND JSON_VALUE(data, '$.nonce') = ? AND expires_at > ?`,
      [c.step, JSON.stringify(c.data), c.expiresAt, this.clock.now(), c.chatId, fromStep, c.data.nonce, this.clock.now()],
    );
    return Number(res.affectedRows) === 1;
  }

  /** Ends the dialogue if it is still at `step`; true for exactly one caller. */
  async take(c: Conversation, step: LimitStep): Promise<boolean> {
    const res = await this.ds.query(
      `DELETE FROM telegram_conversations WHERE chat_id = ? AND step = ? AND JSON_VALUE(data, '$.nonce') = ? AND expires_at > ?`,
      [c.chatId, step, c.data.nonce, this.clock.now()],
    );
    return Number(res.affectedRows) === 1;
  }

  async clear(chatId: number): Promise<void> {
    await this.ds.query('DELETE FROM telegram_conversations WHERE chat_id = ?', [chatId]);
  }
}
