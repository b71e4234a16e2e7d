// A TCP proxy between a gateway and PostgreSQL, to play the database's faults: cut every
// connection, stall every byte, hold back only the server's answers (a statement arrives and
// commits, its reply is lost), slow the link, or move to another server (a failover moving the
// database's address). None is installable here, and the faults need only a few lines of net.
import net from 'node:net';

export type ProxyMode = { kind: 'pass' } | { kind: 'cut' } | { kind: 'stall' } | { kind: 'deaf' } | { kind: 'slow'; delayMs: number };

export interface TcpProxy {
  readonly port: number;
  /** Opened connections (both ends) since the start. */
  readonly connections: number;
  mode(next: ProxyMode): void;
  /** Where new connections go from now on (existing ones are left as they are). */
  target(port: number, host?: string): void;
  close(): Promise<void>;
}

interface Pair {
  client: net.Socket;
  server: net.Socket;
  /** Bytes held back while stalled or slowed, in order, per direction. */
  held: Array<{ to: net.Socket; chunk: Buffer }>;
}

export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  let current: ProxyMode = { kind: 'pass' };
  let upstream = { port: targetPort, host: targetHost };
  let opened = 0;
  const pairs = new Set<Pair>();

  const destroy = (p: Pair) => {
    p.client.destroy();
    p.server.destroy();
    pairs.delete(p);
  };
  const forward = (p: Pair, to: net.Socket, chunk: Buffer) => {
    if (current.kind === 'stall') {
      p.held.push({ to, chunk });
      return;
    }
    if (current.kind === 'deaf') {
      // The server hears everything; its answers wait until the link passes again.
      if (to === p.client) p.held.push({ to, chunk });
      else if (!to.destroyed) to.write(chunk);
      return;
    }
    if (current.kind === 'slow') {
      const delay = current.delayMs;
      p.held.push({ to, chunk });
      // One timer per chunk keeps the order: each is sent after the ones held before it.
      setTimeout(() => flush(p, 1), delay).unref();
      return;
    }
    p.held.push({ to, chunk });
    flush(p, Infinity);
  };
  /** Sends up to `n` held chunks (all when n is Infinity). */
  const flush = (p: Pair, n: number) => {
    for (let i = 0; i < n && p.held.length > 0 && current.kind !== 'stall' && current.kind !== 'deaf'; i++) {
      const { to, chunk } = p.held.shift()!;
      if (!to.destroyed) to.write(chunk);
    }
  };

  const server = net.createServer((client) => {
    opened++;
    if (current.kind === 'cut') {
      client.destroy();
      return;
    }
    const conn = net.connect(upstream.port, upstream.host);
    const p: Pair = { client, server: conn, held: [] };
    pairs.add(p);
    client.on('data', (c) => forward(p, conn, c));
    conn.on('data', (c) => forward(p, client, c));
    for (const s of [client, conn]) {
      s.on('error', () => destroy(p));
      s.on('close', () => destroy(p));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;

  return {
    port,
    get connections() {
      return opened;
    },
    mode(next) {
      current = next;
      if (next.kind === 'cut') for (const p of [...pairs]) destroy(p);
      if (next.kind === 'pass') for (const p of pairs) flush(p, Infinity);
    },
    target(nextPort, host = '127.0.0.1') {
      upstream = { port: nextPort, host };
    },
    async close() {
      for (const p of [...pairs]) destroy(p);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
