import type { Executor } from '../../db/mysql-store.js';

// The only code that reads or writes `telegram_conversations`: the owner bot's one open dialogue
// per chat, its data kept as JSON.

export type ConversationKind = 'newagent' | 'approve';
export type LimitStep = 'perRental' | 'budget' | 'concurrent' | 'rentalLength' | 'idleMinutes' | 'confirm';

/** Limits gathered so far (cents, a count, seconds and minutes), plus what the dialogue works on. */
export interface ConversationData {
  /** Random id printed into each button's data, so a keyboard from an older dialogue is refused. */
  nonce: string;
  maxPerRentalMinor?: number;
  budgetLimitMinor?: number;
  maxConcurrentDeployments?: number;
  /** The longest rental, once answered; null: the owner chose no limit. */
  maxRentalSeconds?: number | null;
  /** Minutes of idle GPUs before a rental is warned, then ended, once answered; null: never. */
  idleTerminateMinutes?: number | null;
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

/** The chat's stored dialogue, expired or not; null when there is none. */
export async function storedConversation(ds: Executor, chatId: number): Promise<Conversation | null> {
  const rows: { account_id: string; kind: ConversationKind; step: LimitStep; data: string; expires_at: Date }[] =
    await ds.query('SELECT account_id, kind, step, data, expires_at FROM telegram_conversations WHERE chat_id = ?', [
      chatId,
    ]);
  const row = rows[0];
  if (!row) return null;
  return {
    chatId,
    accountId: row.account_id,
    kind: row.kind,
    step: row.step,
    data: JSON.parse(row.data) as ConversationData,
    expiresAt: new Date(row.expires_at),
  };
}

/** Writes the chat's dialogue, replacing any it had. */
export async function saveConversation(ds: Executor, c: Conversation, now: Date): Promise<void> {
  await ds.query(
    `INSERT INTO telegram_conversations (chat_id, account_id, kind, step, data, expires_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)
       ON DUPLICATE KEY UPDATE account_id = VALUES(account_id), kind = VALUES(kind), step = VALUES(step),
         data = VALUES(data), expires_at = VALUES(expires_at), updated_at = VALUES(updated_at)`,
    [c.chatId, c.accountId, c.kind, c.step, JSON.stringify(c.data), c.expiresAt, now],
  );
}

/**
 * Writes `c` over the chat's dialogue only while that is still the same dialogue (its nonce), at
 * `fromStep` and unexpired at `now`; false when it was not.
 */
export async function advanceConversation(
  ds: Executor,
  c: Conversation,
  fromStep: LimitStep,
  now: Date,
): Promise<boolean> {
  const res = await ds.query(
    `UPDATE telegram_conversations SET step = ?, data = ?, expires_at = ?, updated_at = ?
        WHERE chat_id = ? AND step = ? AND JSON_VALUE(data, '$.nonce') = ? AND expires_at > ?`,
    [c.step, JSON.stringify(c.data), c.expiresAt, now, c.chatId, fromStep, c.data.nonce, now],
  );
  return Number(res.affectedRows) === 1;
}

/** Deletes the chat's dialogue only while it is still `c` (its nonce), at `step` and unexpired at `now`; false when it was not. */
export async function takeConversation(ds: Executor, c: Conversation, step: LimitStep, now: Date): Promise<boolean> {
  const res = await ds.query(
    `DELETE FROM telegram_conversations WHERE chat_id = ? AND step = ? AND JSON_VALUE(data, '$.nonce') = ? AND expires_at > ?`,
    [c.chatId, step, c.data.nonce, now],
  );
  return Number(res.affectedRows) === 1;
}

/** Deletes the chat's dialogue, whatever its state. */
export async function deleteConversation(ds: Executor, chatId: number): Promise<void> {
  await ds.query('DELETE FROM telegram_conversations WHERE chat_id = ?', [chatId]);
}

/**
 * The owner bot's open dialogues (`telegram_conversations`): one per chat, with the step it is at,
 * what it gathered so far and when it expires. Each call is one statement standing alone; the
 * conditional ones are how two presses of a button, or two processes, settle who moves it on.
 */
export interface ConversationsRepository {
  /** The chat's stored dialogue, expired or not; null when there is none. */
  get(chatId: number): Promise<Conversation | null>;
  /** Writes the chat's dialogue, replacing any it had. */
  save(c: Conversation, now: Date): Promise<void>;
  /**
   * Writes `c` over the chat's dialogue only while that is still the same dialogue (its nonce),
   * at `fromStep` and unexpired at `now`; false, with nothing changed, when it was not.
   */
  advance(c: Conversation, fromStep: LimitStep, now: Date): Promise<boolean>;
  /** Deletes the chat's dialogue only while it is still `c` (its nonce), at `step` and unexpired at `now`; false when not. */
  take(c: Conversation, step: LimitStep, now: Date): Promise<boolean>;
  /** Deletes the chat's dialogue, whatever its state. */
  delete(chatId: number): Promise<void>;
}

export class MysqlConversationsRepository implements ConversationsRepository {
  constructor(private readonly sql: Executor) {}

  get(chatId: number): Promise<Conversation | null> {
    return storedConversation(this.sql, chatId);
  }

  save(c: Conversation, now: Date): Promise<void> {
    return saveConversation(this.sql, c, now);
  }

  advance(c: Conversation, fromStep: LimitStep, now: Date): Promise<boolean> {
    return advanceConversation(this.sql, c, fromStep, now);
  }

  take(c: Conversation, step: LimitStep, now: Date): Promise<boolean> {
    return takeConversation(this.sql, c, step, now);
  }

  delete(chatId: number): Promise<void> {
    return deleteConversation(this.sql, chatId);
  }
}
