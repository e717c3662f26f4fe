/**
 * The limits the service enforces and the texts word: a rental's machine settings, its lease, its
 * wait for capacity and its budget. The service checks against these (rentals/admission/machine-settings.ts,
 * admission) and the hints and clients quote them, so a limit changes in one place.
 */

/** Names of environment variables: upper-case letters, digits and _, not starting with a digit. */
export const ENV_NAME_PATTERN = /^[A-Z_][A-Z0-9_]*$/;
export const MAX_ENV_VARIABLES = 50;
export const MAX_ENV_VALUE_BYTES = 4096;
/** Names and values together, in UTF-8 bytes: what every provider's create request can carry. */
export const MAX_ENV_TOTAL_BYTES = 32_768;
export const MAX_STARTUP_SCRIPT_BYTES = 16_384;
export const MAX_EXPOSED_PORTS = 5;
/** The shortest lease: a machine stopped sooner would not have finished booting. */
export const MIN_LEASE_SECONDS = 60;
/** How long a GPU intent may wait for capacity. */
export const MIN_WAIT_FOR_CAPACITY_SECONDS = 60;
export const MAX_WAIT_FOR_CAPACITY_SECONDS = 86_400;

/**
 * The smallest `budgetMinor` the service accepts on any rental, whatever the account's billing
 * model: below it a machine is stopped by its spending cap minutes after it starts.
 */
export const MIN_BUDGET_MINOR = 500;

/** A limit as the texts write it: 4,096. */
export const limitText = (n: number): string => n.toLocaleString('en-US');
