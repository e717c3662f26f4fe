import { fixtureText, type QuirkSetting } from './recorded.js';

/**
 * The Lambda Cloud deviations from its 1.8.3 document that the fake can serve
 * (`test/fixtures/providers/lambda/`, rows L1-L3 of `DIFFERENCES.md`). `behaviour: 'recorded'`
 * turns every one on.
 */
export interface LambdaQuirks {
  [name: string]: QuirkSetting<string | number>;
  /**
   * Terminating an instance that is already `terminating` answers `global/unknown` "An unknown
   * error occurred." (`terminate-global-unknown.txt`), a code the 1.8.3 document lacks. The
   * recording printed no status: `true` answers 500; pin `400` to get a 4xx.
   */
  globalUnknown: QuirkSetting<400 | 500>;
  /**
   * A launch with `quantity` above 1 fails field validation, `global/invalid-parameters`
   * "quantity: Input should be less than or equal to 1" (`launch-invalid-parameters-quantity.txt`).
   */
  launchQuantity: QuirkSetting;
  /**
   * Launching past the account's instance limit (live instances; 10 for `true`) answers
   * `global/invalid-parameters` "Requested too many instances."
   * (`launch-400-invalid-parameters-too-many.txt`).
   */
  instanceLimit: QuirkSetting<number>;
  /**
   * The edge answers a request without a product User-Agent (absent or a runtime's default) with
   * 403 and an HTML page. No such page from Lambda was recorded (`SOURCES.md`): the markup is this
   * fake's, shaped like a CDN's block page, so only "403 + text/html, not JSON" is the claim.
   */
  edgeHtml403: QuirkSetting;
}

export const LAMBDA_QUIRKS: readonly (keyof LambdaQuirks & string)[] = [
  'globalUnknown',
  'launchQuantity',
  'instanceLimit',
  'edgeHtml403',
];

/** A `code: message` pair as clients printed it (the fixtures keep the printed line, not JSON). */
export interface PrintedError {
  code: string;
  message: string;
}

/**
 * Reads a printed Lambda error: the last `area/code: message` on the line (a traceback's prefix
 * is dropped), or the whole text as the message of `fallbackCode` when the print kept no code.
 */
function printedError(file: string, fallbackCode: string): PrintedError {
  const text = fixtureText('lambda', file).trim();
  const m = /([a-z-]+(?:\/[a-z-]+)+): (.+)$/.exec(text);
  return m ? { code: m[1], message: m[2] } : { code: fallbackCode, message: text };
}

let bodies: { globalUnknown: PrintedError; quantity: PrintedError; tooMany: PrintedError } | undefined;

/** The recorded error texts, read from the fixture files at first use. */
export function lambdaRecorded(): { globalUnknown: PrintedError; quantity: PrintedError; tooMany: PrintedError } {
  bodies ??= {
    globalUnknown: printedError('terminate-global-unknown.txt', 'global/unknown'),
    // The field-validation print kept only the message; Lambda files it under invalid parameters.
    quantity: printedError('launch-invalid-parameters-quantity.txt', 'global/invalid-parameters'),
    tooMany: printedError('launch-400-invalid-parameters-too-many.txt', 'global/invalid-parameters'),
  };
  return bodies;
}

/** The edge's block page (see `edgeHtml403`). */
export const EDGE_403_HTML = `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Access denied</title></head>
<body>
<h1>403 Forbidden</h1>
<p>Access denied. The request was blocked by the site's security rules.</p>
</body>
</html>
`;
