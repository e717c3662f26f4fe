import { McpServer } from '@modelcontextprotocol/server';
import { serverInstructions } from './instructions.js';
import type { ToolDeps } from './tool.js';
import { registerTools } from './tools.js';

export type { ToolDeps } from './tool.js';
export type { InstructionsVariant } from './instructions.js';

/** What names the server to its clients besides its tools. */
export interface ToolServerOptions {
  /** The server's version, as the handshake reports it. */
  version: string;
}

/**
 * The GPU rental tool server, for any transport: an {@link McpServer} named `gpu-rental` with
 * the instructions of `deps.instructions` (see {@link ToolDeps}) and the eleven tools, each call
 * going through `callTool`. Nothing is connected and nothing runs until a transport serves it;
 * a stdio process builds one per connection, a remote endpoint one per HTTP request, each with
 * its own `deps`.
 */
export function createToolServer(deps: ToolDeps, options: ToolServerOptions): McpServer {
  const variant = deps.instructions ?? (deps.adoptToken ? 'stdio' : 'remote');
  const server = new McpServer(
    { name: 'gpu-rental', title: 'GPU rental', version: options.version },
    { instructions: serverInstructions(variant) },
  );
  registerTools(server, deps);
  return server;
}
