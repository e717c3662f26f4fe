import { pino, type Logger } from 'pino';

export type { Logger };

/** Fields that may carry a credential anywhere in a logged object. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["stripe-signature"]',
  'req.headers["x-telegram-bot-api-secret-token"]',
  'token',
  '*.token',
  'secret',
  '*.secret',
  'setupCode',
  '*.setupCode',
  'privateKey',
  '*.privateKey',
  'password',
  '*.password',
];

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'gpu-rental' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}
