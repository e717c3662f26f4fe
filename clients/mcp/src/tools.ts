import type { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { createTopupLink, getAccount, listEvents, signup } from './account-tools.js';
import { revealSshCredentials } from './access-tools.js';
import { listGpus, listOffers } from './catalog-tools.js';
import { callExtra } from './rental-steps.js';
import { createRental, getRental, listRentals, terminateDeployment } from './rental-tools.js';
import { callTool, type ToolDefinition, type ToolDeps } from './tool.js';

export type { ToolDeps } from './tool.js';

/** The eleven tools, in the order a client lists them. */
export const TOOLS: readonly ToolDefinition[] = [
  listGpus,
  listOffers,
  getAccount,
  signup,
  createTopupLink,
  createRental,
  getRental,
  listRentals,
  listEvents,
  revealSshCredentials,
  terminateDeployment,
];

/**
 * Registers the eleven tools on a server, whatever its transport. Every call goes through
 * {@link callTool}: secret-looking input is refused and the token never returned; a result
 * carrying a private key is withheld unless the call asked for it on a server allowed to.
 */
export function registerTools(server: McpServer, deps: ToolDeps): void {
  // Deprecated for the 2026-07-28 era, whose requests carry their own capabilities; a 2025-era
  // connection declared them once, at initialize, and this is where the SDK keeps them.
  const declared = () => server.server.getClientCapabilities();
  for (const tool of TOOLS) {
    const { name, title, description, annotations } = tool;
    const inputSchema = z.object(tool.inputSchema);
    const outputSchema = z.object(tool.outputSchema);
    server.registerTool(name, { title, description, inputSchema, outputSchema, annotations }, (args, ctx) =>
      callTool(tool, deps, args, callExtra(ctx, declared)),
    );
  }
}
