// The child's half of the protocol in children.ts.

/** Tells the parent the child listens on `port`. */
export function announceReady(port: number): void {
  process.send?.({ type: 'ready', port });
}

/**
 * Runs `close` and exits 0 when the parent says stop, on SIGTERM/SIGINT, or when the parent is
 * gone. Exiting through process.exit lets `node --cpu-prof` write its profile.
 */
export function exitOnStop(close: () => Promise<void> | void): void {
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    const done = (): never => process.exit(0);
    const force = setTimeout(done, 3_000);
    force.unref();
    Promise.resolve()
      .then(close)
      .then(done, (err: unknown) => {
        process.stderr.write(`bench child: close failed: ${String(err)}\n`);
        done();
      });
  };
  process.on('message', (m: unknown) => {
    if (typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'stop') stop();
  });
  process.on('disconnect', stop);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
