// Launched replicas: one child process per replica on a free local port (the spawning itself,
// and stopping, is replica-process.ts).
import type { ServiceConfig } from '../../config/types.js';
import type { Logger } from '../../log/logger.js';
import { findFreePort, spawnReplica, type ReplicaProcess } from './replica-process.js';
import type { ReplicaSource, Started, StartRequest } from './source.js';

export class ProcessSource implements ReplicaSource {
  constructor(
    private readonly service: ServiceConfig,
    private readonly log: Logger,
  ) {}

  async start(request: StartRequest): Promise<Started> {
    const port = await findFreePort();
    if (request.abandoned()) throw new Error('closed while choosing a port');
    const command = this.service.replicas.command!;
    const units = request.units?.join(',');
    const child: ReplicaProcess = spawnReplica({
      command,
      env: this.service.replicas.env,
      port,
      units,
      logger: this.log,
      service: this.service.slug,
      replica: request.id,
      onExit: (exit) => request.onExit(exit, child), // never called before spawnReplica returns
    });
    this.log.info({ service: this.service.slug, replica: request.id, pid: child.pid, port, why: request.why, command, ...(units === undefined ? {} : { pool: this.service.replicas.pool, units }) }, 'replica process spawned');
    return { endpoint: { origin: `http://127.0.0.1:${port}`, host: `127.0.0.1:${port}`, probeHost: '127.0.0.1', probePort: port }, process: child };
  }
}
