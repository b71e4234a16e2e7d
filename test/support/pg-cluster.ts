// Throwaway PostgreSQL clusters made with Debian's tools (pg_createcluster, pg_ctlcluster,
// pg_basebackup), for the failover test: a primary and a synchronous streaming standby on ports
// of their own. Clusters run as the postgres OS user, so this works when the tests run as root
// (CI) or as postgres. Every cluster made here is dropped by dropAll(), also after a failure.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';

export interface Cluster {
  name: string;
  port: number;
  url: string;
}

const made = new Set<string>();
let version: string | null = null;

/** The installed PostgreSQL major version with Debian's cluster tools, or null (the test is then skipped). */
export function clusterToolsVersion(): string | null {
  if (version) return version;
  try {
    execFileSync('sh', ['-c', 'command -v pg_createcluster && command -v pg_basebackup'], { stdio: 'ignore' });
  } catch {
    return null;
  }
  if (!existsSync('/usr/lib/postgresql')) return null;
  const versions = readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v));
  version = versions.sort((a, b) => Number(b) - Number(a))[0] ?? null;
  // Clusters run as the postgres user: root may run the tools for it, anyone else must be postgres.
  if (version && process.getuid?.() !== 0 && process.env.USER !== 'postgres') return null;
  return version;
}

const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 }).toString();
const asPostgres = (cmd: string, args: string[]) => (process.getuid?.() === 0 ? run('runuser', ['-u', 'postgres', '--', cmd, ...args]) : run(cmd, args));

/** Creates and starts a cluster that trusts local connections; `conf`: postgresql.conf settings. */
export function createCluster(name: string, port: number, conf: Record<string, string> = {}): Cluster {
  const v = clusterToolsVersion()!;
  made.add(name);
  const options = Object.entries({ fsync: 'off', full_page_writes: 'off', ...conf }).flatMap(([k, val]) => ['-o', `${k}=${val}`]);
  run('pg_createcluster', [v, name, '-p', String(port), ...options, '--', '--auth=trust']);
  run('pg_ctlcluster', [v, name, 'start']);
  return { name, port, url: `postgres://postgres@127.0.0.1:${port}/postgres` };
}

/**
 * A streaming standby of `primary`, registered as `applicationName` (name it in the primary's
 * synchronous_standby_names to make it synchronous): created empty, filled by pg_basebackup.
 */
export function createStandby(primary: Cluster, name: string, port: number, applicationName: string): Cluster {
  const v = clusterToolsVersion()!;
  made.add(name);
  run('pg_createcluster', [v, name, '-p', String(port), '-o', 'fsync=off', '--', '--auth=trust']);
  const dataDir = `/var/lib/postgresql/${v}/${name}`;
  for (const f of readdirSync(dataDir)) rmSync(`${dataDir}/${f}`, { recursive: true, force: true });
  asPostgres('pg_basebackup', [
    '-d',
    `host=127.0.0.1 port=${primary.port} user=postgres application_name=${applicationName}`,
    '-D',
    dataDir,
    '-R',
    '-X',
    'stream',
  ]);
  run('pg_ctlcluster', [v, name, 'start']);
  return { name, port, url: `postgres://postgres@127.0.0.1:${port}/postgres` };
}

export function stopCluster(c: Cluster, mode: 'fast' | 'immediate' = 'fast'): void {
  run('pg_ctlcluster', [clusterToolsVersion()!, c.name, 'stop', '-m', mode]);
}

export function promote(c: Cluster): void {
  run('pg_ctlcluster', [clusterToolsVersion()!, c.name, 'promote']);
}

/** Stops and removes every cluster made here; never throws. */
export function dropAll(): void {
  for (const name of made) {
    try {
      run('pg_dropcluster', ['--stop', clusterToolsVersion()!, name]);
    } catch {
      /* already gone */
    }
    made.delete(name);
  }
}
