import { ProviderApiError } from '../provider-http.js';
import { callTemplate, safeCode, safeName, shapeOf, type DriftKind, type DriftRecorder, type Shape } from './drift.js';

/** A failed answer as the drift report sees it: the status, the cloud's code, and the body (JSON or text). */
export interface UnreadAnswer {
  status: number;
  code?: string;
  json: unknown;
  text: string;
}

/** What a body that is not JSON is: `'empty'`, `'html'` (an edge's or proxy's page) or `'text'`. */
function bodyShape(json: unknown, text: string): Shape {
  if (json !== null && json !== undefined) return shapeOf(json);
  if (text.trim() === '') return 'empty';
  return /^\s*<(!doctype|html|head|body|title)\b/i.test(text) ? 'html' : 'text';
}

/**
 * A plugin's reporter of drift for one provider, over the host's {@link DriftRecorder}: it
 * computes the shapes, cleans `where` ({@link callTemplate}) and never lets recording fail the call.
 */
export class ProviderDrift {
  constructor(
    private readonly recorder: DriftRecorder,
    readonly provider: string,
  ) {}

  private record(kind: DriftKind, where: string, shape: () => Shape): void {
    try {
      this.recorder.record({ provider: this.provider, kind, where: callTemplate(where), shape: shape() });
    } catch {
      // Recording is a report for the operator; a call must never fail for it.
    }
  }

  /** A state the plugin's state table does not know; its name is kept when it is name-like ({@link safeName}). */
  unknownState(where: string, raw: unknown): void {
    this.record('unknown_state', where, () => ({ state: safeName(raw) }));
  }

  /** A field, or a whole answer, of another shape than the plugin reads. */
  unknownFieldShape(where: string, value: unknown): void {
    this.record('unknown_field_shape', where, () => shapeOf(value));
  }

  /** A listing page whose items or cursor the plugin cannot read. */
  unknownPageShape(where: string, page: unknown): void {
    this.record('unknown_page_shape', where, () => shapeOf(page));
  }

  /** A failed answer only a catch-all row of the error table took: its status, a code-like code, its body's shape. */
  unmatchedError(where: string, answer: UnreadAnswer): void {
    this.record('unmatched_error', where, () => {
      const code = safeCode(answer.code);
      return {
        status: String(answer.status),
        ...(code === undefined ? {} : { code }),
        body: bodyShape(answer.json, answer.text),
      };
    });
  }

  /** Records `value` as an unknown field shape and returns the `bad_response` error to throw for it. */
  badResponse(where: string, value: unknown, message: string, status?: number): ProviderApiError {
    this.unknownFieldShape(where, value);
    return new ProviderApiError('bad_response', message, status);
  }

  /** Records `page` as an unknown page shape and returns the `bad_response` error to throw for it. */
  badPage(where: string, page: unknown, message: string, status?: number): ProviderApiError {
    this.unknownPageShape(where, page);
    return new ProviderApiError('bad_response', message, status);
  }
}
