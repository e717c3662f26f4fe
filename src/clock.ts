/** Source of "now" for every rule that depends on time, so tests can move it. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** A clock tests can set and advance; starts at the real time unless told otherwise. */
export class ManualClock implements Clock {
  private t: number;

  constructor(start: Date = new Date()) {
    this.t = start.getTime();
  }

  now(): Date {
    return new Date(this.t);
  }

  advance(ms: number): void {
    this.t += ms;
  }

  set(d: Date): void {
    this.t = d.getTime();
  }
}
