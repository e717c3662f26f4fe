import type { GprClient } from '@gpu-rental/sdk';
import type { ShapeOutput, ZodRawShapeCompat } from '@modelcontextprotocol/sdk/server/zod-compat.js';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { containsSecret, failure, guardRefusal, type Guarded, redact, refusal, secretOutputRefusal } from './guard.js';
import type { CallExtra } from './rental-steps.js';

/** What the tools run with: the service's client and what this server allows. Nothing of a transport. */
export interface ToolDeps {
  client: () => GprClient;
  /** GPR_MCP_ALLOW_SPEND=1: tools that spend money, destroy a machine or open SSH access may run. */
  allowSpend: boolean;
  /** GPR_MCP_ALLOW_SECRETS=1: reveal_ssh_credentials may return the private key itself when asked to. */
  allowSecrets: boolean;
  token?: string;
  /**
   * Makes a token this server just received (the signup tool's) the one it calls with from now
   * on, and stores it in the config file (mode 0600) for later runs; answers the file's path.
   */
  adoptToken: (token: string) => string;
  log: (line: string) => void;
}

/**
 * One tool as a client lists it (name, title, description, schemas, annotations) and what a call
 * of it does. {@link callTool} wraps every `run` alike, so a definition holds only its own rules.
 */
export interface ToolDefinition<Input extends ZodRawShapeCompat = ZodRawShapeCompat> {
  name: string;
  title: string;
  description: string;
  inputSchema: Input;
  outputSchema: ZodRawShapeCompat;
  annotations: ToolAnnotations;
  /** What the tool does that a server started without GPR_MCP_ALLOW_SPEND=1 refuses. */
  guarded?: Guarded;
  /** Whether the call asked for a private key in its result (shown only on a server allowed to). */
  keyInResult?: (args: ShapeOutput<Input>) => boolean;
  /** The secrets the call sends (variable values, a script), hidden from its result. */
  secretsIn?: (args: ShapeOutput<Input>) => string[];
  run: (args: ShapeOutput<Input>, deps: ToolDeps, extra?: CallExtra) => Promise<CallToolResult>;
}

/**
 * A definition, its `run` checked against its input schema, as an entry of the tool table. The
 * table holds tools of different inputs, which a function's parameter types do not widen to.
 */
export const defineTool = <Input extends ZodRawShapeCompat>(tool: ToolDefinition<Input>): ToolDefinition =>
  tool as unknown as ToolDefinition;

/**
 * One call of a tool, with what every tool does around its own work: secret-looking input is
 * refused, a guarded tool refuses on a read-only server, the token and the call's secrets never
 * come back, a result carrying a private key is withheld unless the call asked for it on a server
 * allowed to, and any failure becomes one tool error.
 */
export async function callTool(
  tool: ToolDefinition,
  deps: ToolDeps,
  args: ShapeOutput<ZodRawShapeCompat>,
  extra?: CallExtra,
): Promise<CallToolResult> {
  const { name } = tool;
  // The token and anything the call sent as a secret (variable values, a script) never come back.
  const hidden = [...(deps.token ? [deps.token] : []), ...(tool.secretsIn?.(args) ?? [])];
  if (containsSecret(args)) {
    deps.log(`${name}: refused secret-looking input`);
    return refusal(
      'The input looks like a private key or an API token. Never pass secrets to tools; nothing was sent.',
    );
  }
  if (tool.guarded && !deps.allowSpend) {
    deps.log(`${name}: refused (read-only)`);
    return guardRefusal(name, tool.guarded);
  }
  try {
    const result = redact(await tool.run(args, deps, extra), hidden);
    if (!(deps.allowSecrets && tool.keyInResult?.(args)) && containsSecret(result)) {
      deps.log(`${name}: withheld a secret-looking result`);
      return secretOutputRefusal();
    }
    deps.log(`${name}: ok`);
    return result;
  } catch (err) {
    const result = redact(failure(err), hidden);
    deps.log(`${name}: ${(err as { code?: string }).code ?? 'error'}`);
    return result;
  }
}
