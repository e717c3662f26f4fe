/*
 * Preloaded (`node --expose-gc --import ./bench/child-probe.mjs ...`) into a process a bench forks
 * to measure its memory: the process exits when the bench goes, and answers the message 'memory'
 * with process.memoryUsage() taken after a full garbage collection (so idle figures do not depend
 * on when V8 last collected), and 'memory-now' with it as it stands (under load). It adds nothing
 * else to the process it measures.
 */
process.once('disconnect', () => process.exit(1));
process.channel?.unref();
process.on('message', (msg) => {
  if (msg !== 'memory' && msg !== 'memory-now') return;
  if (msg === 'memory') globalThis.gc?.();
  process.send?.({ memory: process.memoryUsage() });
});
