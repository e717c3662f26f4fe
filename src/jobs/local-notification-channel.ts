import { BaseNotificationChannel, type JobNotification, type JobStateNotification } from 'agenda';

/**
 * Agenda notification channel inside one process: a job saved here (JobQueue.now, agenda.now)
 * wakes this process's job processor at once instead of after `processEvery`. Other processes
 * still find the job on their next poll; MySQL has no LISTEN/NOTIFY to tell them sooner.
 *
 * Delivery is deferred and bounded per job name: the enqueuer never waits for a claim, at most
 * `parallelFills` queue fills of one name run at once (each claims jobs one by one, so a few in
 * parallel keep a burst moving), and saves arriving meanwhile fold into one more fill.
 */
export class LocalNotificationChannel extends BaseNotificationChannel {
  private readonly slots = new Map<string, { running: number; pending: JobNotification | undefined }>();

  constructor(private readonly parallelFills = 4) {
    super();
  }

  async connect(): Promise<void> {
    this.clearReconnect();
    this.setState('connected');
  }

  async disconnect(): Promise<void> {
    this.clearReconnect();
    this.handlers.clear();
    this.stateHandlers.clear();
    this.slots.clear();
    this.setState('disconnected');
  }

  async publish(notification: JobNotification): Promise<void> {
    if (this._state !== 'connected') return;
    let slot = this.slots.get(notification.jobName);
    if (!slot) {
      slot = { running: 0, pending: undefined };
      this.slots.set(notification.jobName, slot);
    }
    if (slot.running >= this.parallelFills) {
      slot.pending = notification;
      return;
    }
    this.deliver(notification, slot);
  }

  async publishState(notification: JobStateNotification): Promise<void> {
    if (this._state !== 'connected') return;
    setImmediate(() => void this.notifyStateHandlers(notification));
  }

  private deliver(
    notification: JobNotification,
    slot: { running: number; pending: JobNotification | undefined },
  ): void {
    slot.running++;
    setImmediate(() => {
      this.notifyHandlers(notification)
        .catch((err) => this.emit('error', err))
        .finally(() => {
          slot.running--;
          if (this.slots.get(notification.jobName) !== slot) return;
          const next = slot.pending;
          if (next && this._state === 'connected') {
            slot.pending = undefined;
            this.deliver(next, slot);
          } else if (slot.running === 0) {
            this.slots.delete(notification.jobName);
          }
        });
    });
  }
}
