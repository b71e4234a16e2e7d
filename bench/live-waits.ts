// Where a live call waits while the operator's work runs, measured beside the live calls of
// bench/corrections.ts: the gateway's event loop (GET /healthz, which touches no database) and
// the database's durable commit (a one-row INSERT on a connection of its own, synchronous commit
// as the server has it). A live chat call needs several turns of the loop and two durable appends
// (the hold and the charge), so its latency is read against these two.
import pg from 'pg';

export type Latency = { calls: number; p99: number; max: number };

export function latencyOf(ms: number[]): Latency {
  ms.sort((a, b) => a - b);
  return { calls: ms.length, p99: ms.length ? ms[Math.min(ms.length - 1, Math.floor(ms.length * 0.99))] : 0, max: ms.length ? ms[ms.length - 1] : 0 };
}

/** Samples of one probe: when each started (performance.now()) and how long it took. */
export class Samples {
  private readonly list: Array<{ at: number; ms: number }> = [];
  add(at: number, ms: number) {
    this.list.push({ at, ms });
  }
  between(from: number, to: number): Latency {
    return latencyOf(this.list.filter((s) => s.at >= from && s.at < to).map((s) => s.ms));
  }
}

const PAUSE_MS = 20;
const pause = () => new Promise((r) => setTimeout(r, PAUSE_MS));

export interface LiveWaits {
  loop: Latency;
  commit: Latency;
}

/** Starts both probes, one request every PAUSE_MS each, until stopped. */
export async function startWaitProbes(gatewayUrl: string, databaseUrl: string, schema: string) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const table = `"${schema}".bench_commit_probe`;
  await client.query(`CREATE TABLE IF NOT EXISTS ${table} (at timestamptz NOT NULL DEFAULT now())`);
  const loop = new Samples();
  const commit = new Samples();
  let running = true;
  const timed = async (samples: Samples, work: () => Promise<unknown>) => {
    while (running) {
      const t = performance.now();
      // A failed probe counts with its time too: a stall that ends in an error is still a stall.
      await work().catch(() => undefined);
      samples.add(t, performance.now() - t);
      await pause();
    }
  };
  const runs = [
    timed(loop, async () => (await fetch(`${gatewayUrl}/healthz`)).text()),
    timed(commit, () => client.query(`INSERT INTO ${table} DEFAULT VALUES`)),
  ];
  return {
    between(from: number, to: number): LiveWaits {
      return { loop: loop.between(from, to), commit: commit.between(from, to) };
    },
    async stop() {
      running = false;
      await Promise.all(runs);
      await client.end().catch(() => undefined);
    },
  };
}
