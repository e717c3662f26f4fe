import { randomUUID } from 'node:crypto';
import { AppError } from '../../errors/app-error.js';
import { formatUsd } from '../../vocabulary/money.js';
import type { OfferDto } from '../inventory/inventory.dto.js';
import type { Principal } from '../keys/principal.js';
import { rentalIntent } from '../rentals/admission/rental-intent.js';
import { isOneOf, TERMINAL_STATUSES } from '../rentals/state/rental-status.js';
import type { RentalDto } from '../rentals/wire/rentals.dto.js';
import {
  adjustCanaryCredits,
  ensureCanaryAccount,
  leftByEarlierRuns,
  newRunKey,
  rentalCharges,
  revokeRunKey,
} from './canary-account.js';
import type { CanaryDeps, CanaryOptions, CanarySignals } from './canary-deps.js';
import { canaryLeaseSeconds, chooseCanaryOffer } from './canary-offer.js';
import { stillEndingAdvice, type CanaryPhase, type CanaryReport } from './canary-report.js';
import {
  CANARY_POLL_MS,
  canaryProblem,
  canaryStop,
  isCanaryProblem,
  phaseAt,
  RentalWatch,
  stopOf,
} from './canary-watch.js';
import { listGpusOverSsh } from './gpu-listing.js';
import { verifyFailedGone } from './failed-rental.js';

/**
 * Proves one real rent, SSH, GPU and destroy cycle on the operator's own cloud account: rents the
 * cheapest offer of `options.provider` within the cap through the rental path an agent's
 * POST /api/v1/rentals takes, on the canary's internal account, funded for exactly the cap by a
 * ledger entry; waits for ACTIVE; reveals the rental's credentials as an agent does and runs
 * `nvidia-smi -L` with them; terminates; waits for TERMINATED with verified destruction; reports
 * what it cost from the ledger. Whatever happens once the rental exists (a failure, `signals.stop`,
 * the time bound; the rental's budget ends it at the cap), the machine is ended before this
 * resolves, unless `signals.leave` says to stop waiting. The jobs that move the rental run on
 * whichever workers run: the caller's own (the owner command starts one), the service's, or both.
 */
export async function runCanary(
  deps: CanaryDeps,
  options: CanaryOptions,
  signals: CanarySignals = {},
  onPhase: (p: CanaryPhase) => void = () => undefined,
): Promise<CanaryReport> {
  return new CanaryRun(deps, options, signals, onPhase).run();
}

class CanaryRun {
  private readonly runId = randomUUID();
  private readonly startMs: number;
  private readonly watch: RentalWatch;
  private readonly report: CanaryReport;
  private principal: Principal | undefined;
  private funded = false;

  constructor(
    private readonly deps: CanaryDeps,
    private readonly options: CanaryOptions,
    private readonly signals: CanarySignals,
    private readonly onPhase: (p: CanaryPhase) => void,
  ) {
    this.startMs = deps.clock.now().getTime();
    this.watch = new RentalWatch(deps, (phase, detail) => this.emit(phase, detail), options.pollMs ?? CANARY_POLL_MS);
    this.report = {
      ok: false,
      outcome: 'failed',
      provider: options.provider,
      maxSpendMinor: options.maxSpendMinor,
      offer: null,
      rentalId: null,
      deploymentId: null,
      phases: [],
      gpus: [],
      costMinor: null,
      charges: [],
      status: null,
      terminationReason: null,
      endedAt: null,
      destructionVerified: false,
      receipt: null,
      problem: null,
    };
  }

  private emit(phase: string, detail: string): void {
    const p = phaseAt(this.deps.clock, this.startMs, phase, detail);
    this.report.phases.push(p);
    this.onPhase(p);
  }

  private assertNotStopped(): void {
    if (this.signals.stop?.aborted) throw canaryStop('stop', 'stopped before a machine was rented');
  }

  async run(): Promise<CanaryReport> {
    try {
      await this.rentAndCheck();
      this.report.outcome = 'completed';
    } catch (err) {
      this.noteFailure(err);
    }
    if (this.report.rentalId) await this.teardown();
    await this.close();
    this.report.ok = this.report.outcome === 'completed' && this.report.destructionVerified;
    return this.report;
  }

  private noteFailure(err: unknown): void {
    const why = stopOf(err);
    const message = (err as Error).message;
    if (why === 'stop') this.report.outcome = 'interrupted';
    else if (why === 'leave') this.report.outcome = 'left';
    // Refusals and problems are the operator's to read in the report; anything else is a bug to log.
    else if (why === null && !(err instanceof AppError) && !isCanaryProblem(err))
      this.deps.logger.error({ err }, 'canary failed');
    this.report.problem ??= why === 'stop' ? `interrupted: ${message}` : message;
  }

  /** Everything up to the GPU listing; throws what stopped it. */
  private async rentAndCheck(): Promise<void> {
    const { provider, maxSpendMinor: cap } = this.options;
    const configured = this.deps.providers.registered().map((p) => p.id);
    if (!configured.includes(provider))
      throw canaryProblem(
        `provider "${provider}" is not configured here (PROVIDERS: ${configured.join(', ') || 'none'}).`,
      );
    await this.endLeftRentals();
    const offer = await this.chooseOffer();
    this.assertNotStopped();
    await ensureCanaryAccount(this.deps.store, this.deps.clock);
    this.principal = await newRunKey(this.deps.store, this.deps.keys, `canary ${provider} ${this.runId}`, cap);
    await adjustCanaryCredits(
      this.deps.store,
      this.deps.ledger,
      cap,
      `canary:${this.runId}:fund`,
      `funded run ${this.runId} on ${provider} for its --max-spend`,
    );
    this.funded = true;
    this.assertNotStopped();
    await this.rent(offer, this.principal);
    await this.untilActive(this.principal);
    await this.listGpus(this.principal, offer);
  }

  /**
   * A rental an earlier run left (killed, or left ending) is ended first: one canary's machine at
   * a time. Keys of earlier runs whose rentals are over are revoked.
   */
  private async endLeftRentals(): Promise<void> {
    const left = await leftByEarlierRuns(this.deps.store);
    for (const keyId of left.idleKeyIds) await revokeRunKey(this.deps.keys, keyId);
    for (const { rental, principal } of left.rentals) {
      this.emit('previous', `a previous canary's rental ${rental.orderId} is still ${rental.status}: ending it first`);
      const final = await this.endRental(principal, rental.orderId, 'previous_');
      if (final.status === 'TERMINATED' && final.endedAt === null)
        throw canaryProblem(`the previous canary's rental ${rental.orderId} ended without a verified destruction.`);
      await revokeRunKey(this.deps.keys, principal.keyId);
    }
  }

  private async chooseOffer(): Promise<OfferDto> {
    const { provider, maxSpendMinor, gpu } = this.options;
    const results = await this.deps.inventory.refresh();
    this.deps.inventory.invalidate();
    const mine = results.find((r) => r.provider === provider);
    if (mine && !mine.ok)
      throw canaryProblem(
        `${provider}'s offers could not be read: ${mine.error ?? mine.errorClass ?? 'unknown error'}.`,
      );
    const offers = (await this.deps.inventory.listOffers(gpu ?? undefined).wait()).body;
    const choice = chooseCanaryOffer(offers, provider, maxSpendMinor, gpu);
    if ('problem' in choice) throw canaryProblem(choice.problem);
    const o = choice.offer;
    this.report.offer = { id: o.id, name: o.name, gpuCount: o.gpuCount, pricePerHourMinor: o.pricePerHourMinor };
    this.emit(
      'offer_chosen',
      `offer chosen: ${o.gpuCount}x ${o.name} at ${formatUsd(o.pricePerHourMinor)}/h on ${provider} (offer ${o.id})`,
    );
    return o;
  }

  /** Admission as POST /api/v1/rentals does it: the body parsed into its intent, then the rental service. */
  private async rent(offer: OfferDto, who: Principal): Promise<void> {
    const lease = canaryLeaseSeconds(this.options.timeoutMs, offer);
    const intent = rentalIntent(
      {
        offerId: offer.id,
        budgetMinor: this.options.maxSpendMinor,
        ...(lease === undefined ? {} : { terminateAfterSeconds: lease }),
      },
      this.deps.machinePolicy,
    );
    const { rental } = await this.deps.rentals.create(who, `canary-${this.runId}`, intent);
    this.report.rentalId = rental.rentalId;
    this.report.deploymentId = rental.deploymentId;
    this.report.status = rental.status;
    this.emit(
      'created',
      `created rental ${rental.rentalId} through the rental path: budget ${formatUsd(this.options.maxSpendMinor)}` +
        `${lease === undefined ? '' : `, lease ${lease} s from ACTIVE`}`,
    );
    this.watch.observe(rental);
  }

  private record(r: RentalDto): void {
    this.report.status = r.status;
    this.report.terminationReason = r.terminationReason;
    this.report.endedAt = r.endedAt;
  }

  private async untilActive(who: Principal): Promise<void> {
    // A read's order and deployment are two statements: a FAILED deployment may come with the order
    // read just before its failure was written, so a FAILED without its reason is read once more.
    let failedUnexplained = false;
    const final = await this.watch.until(
      who,
      this.report.rentalId!,
      (r) => {
        this.record(r);
        if (r.status === 'FAILED' && r.failureCode === null && !failedUnexplained) {
          failedUnexplained = true;
          return false;
        }
        if (r.status === 'FAILED')
          throw canaryProblem(`the rental FAILED before ACTIVE: ${r.failureCode}: ${r.failureReason}`);
        if (r.status === 'TERMINATING' || r.status === 'TERMINATED')
          throw canaryProblem(`the rental was ended before ACTIVE (${r.terminationReason ?? 'no reason given'}).`);
        return r.status === 'ACTIVE';
      },
      { signal: this.signals.stop, why: 'stop', deadline: this.startMs + this.options.timeoutMs, waitingFor: 'ACTIVE' },
    );
    this.record(final);
  }

  /** `nvidia-smi -L` over SSH with the rental's key, revealed as an agent reveals it. */
  private async listGpus(who: Principal, offer: OfferDto): Promise<void> {
    const c = await this.deps.credentials.reveal(who, this.report.rentalId!, `canary:${this.runId}`);
    this.report.gpus = await listGpusOverSsh(c, this.signals.stop);
    const gpus = this.report.gpus;
    if (gpus.length < offer.gpuCount)
      throw canaryProblem(`nvidia-smi -L listed ${gpus.length} of the ${offer.gpuCount} GPUs the offer promised.`);
    this.emit('nvidia_smi', `nvidia-smi -L over SSH: ${gpus.length} GPU(s): ${gpus.join('; ')}`);
  }

  /** Ends the run's rental and records how it ended; a failure here is the run's failure. */
  private async teardown(): Promise<void> {
    try {
      const final = await this.endRental(this.principal!, this.report.rentalId!);
      this.record(final);
      if (final.status === 'TERMINATED') {
        this.report.destructionVerified = final.endedAt !== null;
      } else {
        this.report.destructionVerified = await verifyFailedGone(
          this.deps,
          this.report.deploymentId!,
          this.deps.clock.now().getTime() + this.options.timeoutMs,
          this.options.pollMs ?? CANARY_POLL_MS,
          (phase, detail) => this.emit(phase, detail),
          this.signals.leave,
        );
      }
      if (!this.report.destructionVerified) {
        this.report.outcome = 'failed';
        this.report.problem ??= `the rental ended ${final.status} without a verified destruction; see the service's log.`;
      }
    } catch (err) {
      const why = stopOf(err);
      const id = this.report.rentalId!;
      // One more read, so the report says where the rental stands as the run leaves it.
      await this.deps.rentalReads.get(this.principal!, id).then(
        (r) => this.record(r),
        () => undefined,
      );
      this.report.outcome = why === 'leave' ? 'left' : 'failed';
      const state = `Rental ${id} is still ${this.report.status}`;
      const how = stillEndingAdvice(this.report.deploymentId);
      const cause = why === 'leave' ? 'stopped watching it end' : (err as Error).message;
      this.report.problem = `${this.report.problem ? `${this.report.problem} Then ` : ''}${cause}. ${state}: ${how}`;
      this.emit('left', `${state}: left ending in the service`);
    }
  }

  /**
   * Asks for termination (again on each read until it is taken: the request is repeatable) and
   * waits for TERMINATED or FAILED, until `signals.leave` or the teardown's own time bound.
   */
  private async endRental(who: Principal, rentalId: string, prefix = ''): Promise<RentalDto> {
    // Asked before any wait, so even a run told to leave at once has written its termination.
    let asked = await this.askTermination(who, rentalId);
    return this.watch.until(
      who,
      rentalId,
      async (r) => {
        if (isOneOf(TERMINAL_STATUSES, r.status)) return true;
        asked ||= await this.askTermination(who, rentalId);
        return false;
      },
      {
        signal: this.signals.leave,
        why: 'leave',
        deadline: this.deps.clock.now().getTime() + this.options.timeoutMs,
        waitingFor: `the verified destruction of rental ${rentalId}`,
      },
      prefix,
    );
  }

  /** The termination request an agent's POST …/terminate makes; false when it failed (asked again on the next read). */
  private async askTermination(who: Principal, rentalId: string): Promise<boolean> {
    try {
      await this.deps.rentals.terminate(who, rentalId);
      return true;
    } catch (err) {
      this.deps.logger.warn({ err, rentalId }, 'canary: the termination request failed; asking again');
      return false;
    }
  }

  /** The receipt a verified destruction comes with; none is a failure of the cycle the canary proves. */
  private async readReceipt(who: Principal, rentalId: string): Promise<void> {
    try {
      this.report.receipt = await this.deps.receipts.forRental(who, rentalId);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      this.report.outcome = 'failed';
      this.report.problem ??= `the rental ended TERMINATED with a verified destruction but has no teardown receipt: ${err.message}`;
    }
  }

  /** The cost from the ledger; once the rental is over, the unspent credits go back and the run's key is revoked. */
  private async close(): Promise<void> {
    const rentalId = this.report.rentalId;
    const who = this.principal;
    const over = rentalId === null || isOneOf(TERMINAL_STATUSES, this.report.status ?? 'TERMINATED');
    try {
      if (who && rentalId) {
        Object.assign(this.report, await rentalCharges(this.deps.store, who.keyId, rentalId));
        if (this.report.status === 'TERMINATED' && this.report.destructionVerified)
          await this.readReceipt(who, rentalId);
      }
      if (!over) return;
      if (this.funded)
        await adjustCanaryCredits(
          this.deps.store,
          this.deps.ledger,
          0,
          `canary:${this.runId}:return`,
          `what run ${this.runId} did not spend goes back`,
        );
      if (who) await revokeRunKey(this.deps.keys, who.keyId);
    } catch (err) {
      this.deps.logger.error({ err }, 'canary: closing the run failed');
      this.report.problem ??= `closing the run failed: ${(err as Error).message}`;
      if (this.report.outcome === 'completed') this.report.outcome = 'failed';
    }
  }
}
