/**
 * Serialises work per label inside one process: a second `create` for a label waits until the
 * first has finished, so it finds the first one's instance by label instead of making another.
 * A failure of the first does not fail the second.
 */
export class LabelLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  /** Runs `fn` after every earlier call for `label` has settled. */
  run<T>(label: string, fn: () => Promise<T>): Promise<T> {
    const before = this.tails.get(label) ?? Promise.resolve();
    const mine = before.catch(() => undefined).then(fn);
    this.tails.set(label, mine);
    return mine.finally(() => {
      if (this.tails.get(label) === mine) this.tails.delete(label);
    });
  }

  /** Labels with work queued or running (for tests and diagnostics). */
  get size(): number {
    return this.tails.size;
  }
}
