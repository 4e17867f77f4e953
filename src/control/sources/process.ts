// Launched replicas (`replicas.command`): one child process per replica on a free local port
// (the spawning itself is replica-process.ts).
import type { ServiceConfig } from '../../config/types.js';
import type { Logger } from '../../log/logger.js';
import { findFreePort, spawnReplica, type ProcessExit } from './replica-process.js';
import type { ManagedReplica } from '../replicas/replica.js';
import type { Endpoint, ReplicaSource } from './source.js';

export class ProcessSource implements ReplicaSource {
  constructor(
    private readonly service: ServiceConfig,
    private readonly log: Logger,
  ) {}

  async start(r: ManagedReplica, why: string, onExit: (exit: ProcessExit) => void): Promise<Endpoint> {
    const port = await findFreePort();
    if (r.state !== 'starting') throw new Error('closed while choosing a port');
    const command = this.service.replicas.command!;
    r.process = spawnReplica({
      command,
      env: this.service.replicas.env,
      port,
      logger: this.log,
      service: this.service.slug,
      replica: r.id,
      onExit,
    });
    this.log.info({ service: this.service.slug, replica: r.id, pid: r.process.pid, port, why, command }, 'replica process spawned');
    return { origin: `http://127.0.0.1:${port}`, host: `127.0.0.1:${port}`, probeHost: '127.0.0.1', probePort: port };
  }

  async stop(r: ManagedReplica, graceMs: number): Promise<void> {
    if (r.process !== undefined && !r.process.hasExited) await r.process.stop(graceMs);
  }
}
