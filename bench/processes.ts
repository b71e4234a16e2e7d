// Child processes for the gateway benchmark: each server (mock upstream, Tollgate, the peer) and
// the load generator run in processes of their own, so none shares an event loop with another.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';

export interface Child {
  pid: number;
  child: ChildProcess;
  /** Everything the process wrote so far (stdout and stderr, or its log file). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts `command` and waits until its output matches `ready` (returns the match). Output goes to
 * `logFile` when given (a server's per-request log lines then cost it a write, not a pipe read
 * by the benchmark process), else it is collected in memory.
 */
export async function startChild(
  command: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; ready: RegExp; logFile?: string; timeoutMs?: number },
): Promise<{ proc: Child; match: RegExpExecArray }> {
  let buffered = '';
  const fd = opts.logFile ? openSync(opts.logFile, 'w') : null;
  const spawnOpts: SpawnOptions = { cwd: opts.cwd, env: opts.env ?? process.env, stdio: fd === null ? ['ignore', 'pipe', 'pipe'] : ['ignore', fd, fd] };
  const child = spawn(command, args, spawnOpts);
  if (fd !== null) closeSync(fd);
  child.stdout?.on('data', (d) => {
    buffered += d;
  });
  child.stderr?.on('data', (d) => {
    buffered += d;
  });
  const output = () => (opts.logFile ? readFileSync(opts.logFile, 'utf8') : buffered);
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  const proc: Child = {
    pid: child.pid!,
    child,
    output,
    async stop() {
      if (exited) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exit;
      clearTimeout(killer);
    },
  };
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  for (;;) {
    const m = opts.ready.exec(output());
    if (m) return { proc, match: m };
    if (exited) throw new Error(`${command} ${args.join(' ')} exited before it was ready:\n${output().slice(-3000)}`);
    if (Date.now() > deadline) {
      await proc.stop();
      throw new Error(`${command} ${args.join(' ')} was not ready in time:\n${output().slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Resident set size of a process in MiB (VmRSS in /proc/<pid>/status), or null off Linux. */
export function rssMiB(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function processCpuSeconds(pid: number, ticksPerSecond = 100): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
  } catch {
    return null;
  }
}

/** Samples a process's RSS every `everyMs` until stopped; returns the peak and the last sample. */
export function sampleRss(pid: number, everyMs = 100) {
  let peak = rssMiB(pid) ?? 0;
  let last = peak;
  const timer = setInterval(() => {
    const v = rssMiB(pid);
    if (v !== null) {
      last = v;
      if (v > peak) peak = v;
    }
  }, everyMs);
  return {
    stop(): { peakMiB: number; lastMiB: number } {
      clearInterval(timer);
      const v = rssMiB(pid);
      if (v !== null) {
        last = v;
        if (v > peak) peak = v;
      }
      return { peakMiB: peak, lastMiB: last };
    },
  };
}

/** A TCP port nobody listens on right now (for servers that cannot be told to pick one). */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** Runs bench/load.ts in a child process with one job and returns its result. */
export async function runLoad<T>(job: unknown): Promise<T> {
  const { execFile } = await import('node:child_process');
  const script = new URL('./load.ts', import.meta.url).pathname;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--import', 'tsx', script, JSON.stringify(job)], { maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`load generator failed: ${err.message}\n${stderr.slice(-2000)}`));
      try {
        resolve(JSON.parse(stdout.trim().split('\n').pop()!) as T);
      } catch {
        reject(new Error(`load generator printed no result:\n${stdout.slice(-2000)}\n${stderr.slice(-2000)}`));
      }
    });
  });
}

/**
 * Starts bench/load.ts with a job that runs until told to stop (closed-loop): stop() closes its
 * stdin and resolves with the result it then prints.
 */
export async function startLoad<T>(job: unknown): Promise<{ stop(): Promise<T> }> {
  const script = new URL('./load.ts', import.meta.url).pathname;
  const child = spawn(process.execPath, ['--import', 'tsx', script, JSON.stringify(job)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const exit = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return {
    async stop() {
      child.stdin!.end();
      const code = await exit;
      try {
        return JSON.parse(stdout.trim().split('\n').pop()!) as T;
      } catch {
        throw new Error(`load generator (exit code ${code}) printed no result:\n${stdout.slice(-2000)}\n${stderr.slice(-2000)}`);
      }
    },
  };
}
