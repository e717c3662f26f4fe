import { GrammyError, type Api } from 'grammy';
import type { NotificationSender } from '../src/modules/notifications/notifications.service.js';

/** Sends owner notifications through the bot's Bot API client. */
export function telegramSender(api: Api): NotificationSender {
  return {
    async send(chatId, text) {
      try {
        await api.sendMessage(chatId, text, { link_preview_options: { is_disabled: true } });
        return 'sent';
      } catch (err) {
        // Blocked by the owner, or the chat no longer exists: retrying cannot help.
        if (
          err instanceof GrammyError &&
          (err.error_code === 403 ||
            (err.error_code === 400 && /chat not found|user is deactivated/i.test(err.description)))
        ) {
          return 'undeliverable';
        }
        throw err;
      }
    },
  };
}
