import type { GprClient, SshKeyFiles, SshTarget } from '@gpu-rental/sdk';
import {
  type CallToolResult,
  type InputRequiredResult,
  isInputRequiredResult,
  type ToolAnnotations,
} from '@modelcontextprotocol/server';
import type { z } from 'zod';
import { containsSecret, failure, guardRefusal, type Guarded, redact, refusal, secretOutputRefusal } from './guard.js';
import type { InstructionsVariant } from './instructions.js';
import type { CallExtra } from './rental-steps.js';

/**
 * What the tools run with: the service's client and what this server allows. Nothing of a
 * transport: the stdio server gives every field; a remote endpoint leaves out what it has no
 * use for, and the tools then act as this interface says.
 */
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
   *
   * Absent: this server acts for a key it was given by its owner's approval (a remote
   * connection), so signup refuses and sends nothing.
   */
  adoptToken?: (token: string) => string;
  /**
   * Saves a deployment's private key (mode 0600) and names its known_hosts file, as
   * `writeSshKeyFiles` of the SDK does; used by reveal_ssh_credentials.
   *
   * Absent: this server has no disk of the caller's (a remote connection), so
   * reveal_ssh_credentials returns an sshCommand naming a key file the caller saves, and the key
   * itself only when the call asks for it with includePrivateKey on a server allowed to
   * (`allowSecrets`).
   */
  saveKeyFiles?: (target: SshTarget, privateKey: string) => SshKeyFiles;
  /**
   * Which instructions the server gives its clients: `stdio` (a local server started with
   * environment switches, which may sign up and save key files) or `remote` (a connection acting
   * for an agent key its owner approved). Absent: `stdio` when `adoptToken` is given, else `remote`.
   */
  instructions?: InstructionsVariant;
  /**
   * Where the account's owner adds `amountMinor` cents of credits by URL (the owner's Telegram
   * bot), for a key that cannot make top-up links itself (no `billing` scope): what a credit
   * refusal then asks for. Absent, or null: such a refusal says to ask the owner.
   */
  ownerTopupUrl?: (amountMinor: number) => string | null;
  log: (line: string) => void;
}

/** A tool's input or output fields, as zod schemas by name. */
export type ToolShape = Record<string, z.ZodType>;

/** The arguments a call of a tool with input fields `Input` carries, once validated. */
export type ToolArgs<Input extends ToolShape> = z.infer<z.ZodObject<Input>>;

/** What a tool answers: a result, or (create_rental's top-up) a request for the human's input first. */
export type ToolResult = CallToolResult | InputRequiredResult;

/**
 * One tool as a client lists it (name, title, description, schemas, annotations) and what a call
 * of it does. {@link callTool} wraps every `run` alike, so a definition holds only its own rules.
 */
export interface ToolDefinition<Input extends ToolShape = ToolShape> {
  name: string;
  title: string;
  description: string;
  inputSchema: Input;
  outputSchema: ToolShape;
  annotations: ToolAnnotations;
  /** What the tool does that a server started without GPR_MCP_ALLOW_SPEND=1 refuses. */
  guarded?: Guarded;
  /** Whether the call asked for a private key in its result (shown only on a server allowed to). */
  keyInResult?: (args: ToolArgs<Input>) => boolean;
  /** The secrets the call sends (variable values, a script), hidden from its result. */
  secretsIn?: (args: ToolArgs<Input>) => string[];
  run: (args: ToolArgs<Input>, deps: ToolDeps, extra?: CallExtra) => Promise<ToolResult>;
}

/**
 * A definition, its `run` checked against its input schema, as an entry of the tool table. The
 * table holds tools of different inputs, which a function's parameter types do not widen to.
 */
export const defineTool = <Input extends ToolShape>(tool: ToolDefinition<Input>): ToolDefinition =>
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
  args: ToolArgs<ToolShape>,
  extra?: CallExtra,
): Promise<ToolResult> {
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
    deps.log(`${name}: ${isInputRequiredResult(result) ? 'asked for input' : 'ok'}`);
    return result;
  } catch (err) {
    const result = redact(failure(err), hidden);
    deps.log(`${name}: ${(err as { code?: string }).code ?? 'error'}`);
    return result;
  }
}
