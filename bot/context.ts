import type { Context } from 'grammy';
import type { Services } from '../src/container.js';
import type { Account } from '../src/modules/accounts/account.entity.js';
import type { ConversationStore } from '../src/modules/telegram/conversation-store.js';

/** What every feature may use besides the update itself. */
export interface BotFlavor {
  services: Services;
  conversations: ConversationStore;
  /**
   * The owner account bound to the Telegram user of this private chat, found or created on the
   * first update of the user. Unset for updates without a private chat and a sender.
   */
  owner?: Account;
}

export type BotContext = Context & BotFlavor;

/** The owner of a private-chat update; the owner middleware guarantees it for every feature after it. */
export function ownerOf(ctx: BotContext): Account {
  if (!ctx.owner) throw new Error('owner middleware did not run for this update');
  return ctx.owner;
}
