/**
 * Which server the instructions describe: `stdio`, a local server started with environment
 * switches that may sign up and saves SSH keys to files; `remote`, a connection that acts for an
 * agent key its owner approved.
 */
export type InstructionsVariant = 'stdio' | 'remote';

// Lines both variants give, in the order they are read.
const MONEY =
  'GPU rental tools. All money is integer USD cents (500 = $5.00); prices are per hour for the whole machine.';
const CHOOSE =
  "1) list_gpus / list_offers to choose. 2) get_account: check balance.creditsMinor, the key's limits and billing.budgetRequired.";
const TOPUP =
  '3) If credits are short, create_topup_link and give the link to a human; only their payment adds credits.';
const RENT = `4) create_rental with offerId, or gpuModel + gpuCount + maxHourlyPriceMinor; budgetMinor (the most this rental may spend) when billing.budgetRequired is true, optional otherwise. Keep the returned rentalId and idempotencyKey; retry a failed call with the same idempotencyKey, never a new one.
   Optional: machine { image, env, startupScript, ports, diskGb } (what runs on it; list_offers shows each offer's capabilities), terminateAfterSeconds (a lease from ACTIVE), waitForCapacitySeconds (gpuModel only: wait for an eligible offer). env values and the script are secrets: never returned.`;
const WAIT =
  '5) get_rental with rentalId and waitFor ["ACTIVE", "FAILED"] (the service answers within a second of the change, so no polling between calls; repeat until status is ACTIVE; phase says where it stands meanwhile; FAILED carries failureReason and the credit reversal). ACTIVE means SSH gets in, the GPUs are there and the startup script has started; endpoints then give each port\'s URL.';
const TERMINATE = '7) terminate_deployment as soon as the work is done: charges run until then.';
const EVENTS =
  'list_events with after (its last nextAfter) tells what happened since: rentals starting, failing, ending, credits running low.';
const RATE_LIMITED = 'A RATE_LIMITED error says how many seconds to wait.';
const NO_SECRETS_IN = 'Never pass private keys or tokens as tool input.';

// What a local server started with environment switches says about itself.
const STDIO = {
  key: '0) Without a key (get_account answers UNAUTHENTICATED), signup once: it spends nothing and the server keeps the key.',
  ssh: '6) reveal_ssh_credentials saves the private key to a 0600 file and returns keyFile and sshCommand: run sshCommand in a shell, with a remote command appended.',
  refusals:
    'create_rental, create_topup_link, terminate_deployment and reveal_ssh_credentials run only when the server was started with GPR_MCP_ALLOW_SPEND=1; when one is refused, tell the human what to run with the gpr command line (the refusal says what) instead of retrying.',
  privateKey:
    'The private key is returned as text only with includePrivateKey on a server started with GPR_MCP_ALLOW_SECRETS=1; prefer keyFile.',
};

// What a connection acting for an approved agent key says about itself.
const REMOTE = {
  key: "0) This connection acts as an agent key its owner approved: it spends only the owner's credits, within the limits the owner gave the key (get_account shows them), and credits are added only by a human paying a top-up link.",
  ssh: '6) reveal_ssh_credentials returns host, port, user and sshCommand; call it with includePrivateKey to receive the private key, save it where sshCommand reads it with mode 0600, then run sshCommand in a shell, with a remote command appended.',
  refusals:
    'When a call is refused, tell the human what the refusal says they can do instead of retrying; when create_rental is refused for credits it offers the human a top-up link itself.',
  privateKey: 'The private key is a secret: never print or log it.',
};

/** The instructions a server gives its clients at the handshake: one flow, told as the transport lets it run. */
export function serverInstructions(variant: InstructionsVariant): string {
  const own = variant === 'stdio' ? STDIO : REMOTE;
  return [
    MONEY,
    `Flow: ${own.key} ${CHOOSE}`,
    TOPUP,
    RENT,
    WAIT,
    `${own.ssh} ${TERMINATE}`,
    EVENTS,
    `${RATE_LIMITED} ${own.refusals}`,
    `${own.privateKey} ${NO_SECRETS_IN}`,
  ].join('\n');
}
