import {
  Body,
  Delete,
  Extension,
  Get,
  Header,
  OperationId,
  Path,
  Post,
  Query,
  Request,
  Response,
  Route,
  Security,
  SuccessResponse,
  Tags,
} from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import type { Envelope, ErrorEnvelope } from '../../errors/envelope.js';
import { BaseController } from '../../http/controller-base.js';
import { lookupId } from '../../ids.js';
import type { AgentKeysService } from './agent-keys.service.js';
import type { AgentsService } from './agents.service.js';
import { keyLimitsOf } from '../keys/key-limits.js';
import { principalOf } from '../keys/principal.js';
import { addressBucket, clientAddress as trustedAddress } from '../../http/client-address.js';
import type { KeyDto } from '../accounts/accounts.dto.js';
import type {
  AgentKeyIssued,
  ApproveAuthorizationRequest,
  ApproveAuthorizationResponse,
  BeginAuthorizationRequest,
  BeginAuthorizationResponse,
  ExchangeSetupCodeRequest,
  IssueAgentKeyRequest,
  RevokedKey,
  RevokedOwnerKey,
} from './agents.dto.js';

/** The bucket of the per-address limit of agent setup: the trusted client address (an IPv6 client's /64). */
const clientAddress = (req: ExRequest): string => addressBucket(trustedAddress(req));

@Route('api/v1')
@Tags('Agents')
export class AgentsController extends BaseController {
  constructor(
    private readonly agents: AgentsService,
    private readonly agentKeys: AgentKeysService,
  ) {
    super();
  }

  /**
   * An agent begins an authorization: a private setup code (keep it; poll the exchange call with
   * it) and a public approval URL to hand to the owner. Both expire in 10 minutes: the owner
   * approves and the agent exchanges before `expiresAt`. An optional body `{"name": "..."}` names
   * the agent for its owner. Poll the exchange every `pollIntervalSeconds` (also the `Retry-After`
   * of each 409 AGENT_AUTHORIZATION_PENDING): that pace never meets the rate limit.
   */
  @Post('agent-authorizations')
  @OperationId('beginAgentAuthorization')
  @SuccessResponse(200, 'OK')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED (a name over 100 characters)')
  @Response<ErrorEnvelope>(
    409,
    'Never for this call: every call begins a new, independent session, so none can conflict. The 409s of this flow (AGENT_AUTHORIZATION_PENDING, AGENT_SETUP_INVALID) come from the exchange.',
  )
  @Response<ErrorEnvelope>(429, 'RATE_LIMITED (per client address; see Retry-After)')
  @Response<ErrorEnvelope>(503, 'AGENTS_DISABLED')
  async begin(
    @Request() req: ExRequest,
    @Body() body?: BeginAuthorizationRequest,
  ): Promise<Envelope<BeginAuthorizationResponse>> {
    return this.ok(req, await this.agents.beginAuthorization(clientAddress(req), body ?? {}));
  }

  /**
   * The owner approves a pending authorization with the agent's limits: three required, and
   * optionally the longest any of its rentals may run (`maxRentalSeconds`; an owner key that has
   * one may not approve a longer one, nor none). Needs an OWNER key with scopes read, rent and
   * manage. A session is approved once, before the expiry given at its start; the agent exchanges
   * its setup code before that same expiry.
   */
  @Post('agent-authorizations/approve')
  @OperationId('approveAgentAuthorization')
  @Extension('x-owner-only', true)
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(402, 'ACCOUNT_FROZEN')
  @Response<ErrorEnvelope>(
    403,
    "FORBIDDEN (not an owner key, or missing read, rent or manage), KEY_LIMIT_EXCEEDED (a limit beyond the owner key's own)",
  )
  @Response<ErrorEnvelope>(404, 'NOT_FOUND (unknown approval code)')
  @Response<ErrorEnvelope>(409, 'AGENT_SETUP_INVALID (already approved, or expired)')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED')
  async approve(
    @Request() req: ExRequest,
    @Body() body: ApproveAuthorizationRequest,
  ): Promise<Envelope<ApproveAuthorizationResponse>> {
    return this.ok(
      req,
      await this.agents.approveWithKey(principalOf(req), body.approvalCode, keyLimitsOf(body), body.name),
    );
  }

  /**
   * Exchanges a setup code for an AGENT key (scopes read, rent, manage; never billing) carrying the
   * owner's limits, its longest rental included. The token is returned once. While the owner has not approved yet the answer is
   * 409 AGENT_AUTHORIZATION_PENDING with `Retry-After` (seconds): poll again after that long.
   */
  @Post('agent-setups/exchange')
  @OperationId('exchangeSetupCode')
  @Extension('x-retry-after', [409])
  @Response<ErrorEnvelope>(409, 'AGENT_AUTHORIZATION_PENDING or AGENT_SETUP_INVALID (invalid, expired or used)')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED (malformed setup code)')
  @Response<ErrorEnvelope>(429, 'RATE_LIMITED (per client address; see Retry-After)')
  @Response<ErrorEnvelope>(503, 'AGENTS_DISABLED')
  async exchange(@Request() req: ExRequest, @Body() body: ExchangeSetupCodeRequest): Promise<Envelope<AgentKeyIssued>> {
    return this.ok(req, await this.agents.exchange(body.setupCode, clientAddress(req)));
  }

  /**
   * An owner issues an agent key directly: scopes a subset of the owner key's, three limits and
   * optionally the longest any of its rentals may run (`maxRentalSeconds`), none beyond the owner key's own.
   * 201 with the token once; an identical replay of the Idempotency-Key answers 200 with
   * `token: null`; a changed body 409 IDEMPOTENCY_CONFLICT.
   * @param idempotencyKey 1 to 128 characters, fresh per key you mean to create.
   */
  @Post('agent-keys')
  @OperationId('issueAgentKey')
  @Extension('x-owner-only', true)
  @Security('bearer', ['read'])
  @SuccessResponse(201, 'Created')
  @Response<Envelope<AgentKeyIssued>>(200, 'An identical replay: the same key, `token: null`')
  @Response<ErrorEnvelope>(400, 'INVALID_REQUEST (missing or malformed Idempotency-Key)')
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(402, 'ACCOUNT_FROZEN')
  @Response<ErrorEnvelope>(
    403,
    "FORBIDDEN (not an owner key, or scopes beyond the owner key), KEY_LIMIT_EXCEEDED (a limit beyond the owner key's own)",
  )
  @Response<ErrorEnvelope>(
    404,
    'Never for this call: issuing names no existing resource. NOT_FOUND applies to revoking (DELETE /api/v1/agent-keys/{id}) a key that is not on the account.',
  )
  @Response<ErrorEnvelope>(409, 'IDEMPOTENCY_CONFLICT')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED')
  async issue(
    @Request() req: ExRequest,
    @Header('Idempotency-Key') idempotencyKey: string | undefined,
    @Body() body: IssueAgentKeyRequest,
  ): Promise<Envelope<AgentKeyIssued>> {
    const { issued, created } = await this.agentKeys.issueAgentKey(principalOf(req), idempotencyKey, body);
    return this.ok(req, issued, created ? 201 : 200);
  }

  /** The account's agent keys with limits, net spend and active deployments (never secrets). Owner keys only. */
  @Get('agent-keys')
  @OperationId('listAgentKeys')
  @Extension('x-owner-only', true)
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (not an owner key)')
  async list(@Request() req: ExRequest): Promise<Envelope<KeyDto[]>> {
    return this.ok(req, await this.agentKeys.listAgentKeysFor(principalOf(req)));
  }

  /**
   * Revokes an agent key at once: its next call gets the uniform 401. Owner keys only. Revoking
   * stops the key, not its machines: the answer lists the key's unfinished rentals
   * (`liveRentals`), which keep running and are charged until terminated, unless
   * `terminateRentals=true` terminates them with the key. Repeatable (a repeat may terminate them).
   * @param terminateRentals Also terminate the key's unfinished rentals, as POST /api/v1/deployments/{id}/terminate would (default false).
   */
  @Delete('agent-keys/{id}')
  @OperationId('revokeAgentKey')
  @Extension('x-owner-only', true)
  @Security('bearer', ['manage'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (not an owner key)')
  @Response<ErrorEnvelope>(404, 'NOT_FOUND')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED (terminateRentals is not true or false)')
  async revoke(
    @Request() req: ExRequest,
    @Path() id: string,
    @Query() terminateRentals?: boolean,
  ): Promise<Envelope<RevokedKey>> {
    return this.ok(req, await this.agentKeys.revokeAgentKeyFor(principalOf(req), lookupId(id), { terminateRentals }));
  }

  /** The account's OWNER keys, revoked ones included, with limits and usage (never secrets). Owner keys only. */
  @Get('owner-keys')
  @OperationId('listOwnerKeys')
  @Extension('x-owner-only', true)
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (not an owner key)')
  async listOwnerKeys(@Request() req: ExRequest): Promise<Envelope<KeyDto[]>> {
    return this.ok(req, await this.agentKeys.listOwnerKeysFor(principalOf(req)));
  }

  /**
   * Revokes an OWNER key of the account at once, and with it, in one transaction, every agent
   * key it issued, every key an agent obtained through an authorization session it approved, and
   * every session it approved that was not exchanged yet. Each of them gets the uniform 401 on
   * its next call, in every process of the service. Rentals already running keep running and
   * are charged: the answer lists those of the key and of every key it let in (`liveRentals`),
   * and `terminateRentals=true` terminates them with the keys. The calling key may revoke itself.
   * Repeatable.
   * @param terminateRentals Also terminate those rentals, as POST /api/v1/deployments/{id}/terminate would (default false).
   */
  @Delete('owner-keys/{id}')
  @OperationId('revokeOwnerKey')
  @Extension('x-owner-only', true)
  @Security('bearer', ['manage'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (not an owner key, or missing manage)')
  @Response<ErrorEnvelope>(404, 'NOT_FOUND (no owner key with this id on this account)')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED (terminateRentals is not true or false)')
  async revokeOwnerKey(
    @Request() req: ExRequest,
    @Path() id: string,
    @Query() terminateRentals?: boolean,
  ): Promise<Envelope<RevokedOwnerKey>> {
    return this.ok(req, await this.agentKeys.revokeOwnerKeyFor(principalOf(req), lookupId(id), { terminateRentals }));
  }
}
