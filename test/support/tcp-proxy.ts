// A TCP proxy between a gateway and PostgreSQL, to play the database's faults: cut every
// connection, stall every byte, freeze the server (every byte held, and delivered when it wakes,
// even from a client that gave up meanwhile: a stopped server reads what its socket received
// before it sees the close), hold back only the server's answers (a statement arrives and
// commits, its reply is lost), slow the link, or move to another server (a failover moving the
// database's address). None is installable here, and the faults need only a few lines of net.
import net from 'node:net';

export type ProxyMode = { kind: 'pass' } | { kind: 'cut' } | { kind: 'stall' } | { kind: 'freeze' } | { kind: 'deaf' } | { kind: 'slow'; delayMs: number };

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
  /** Frozen: the client closed; the server gets what it was sent, then the close. */
  clientGone?: boolean;
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
  /** A client that closes while the server is frozen: its bytes still reach the server when it wakes. */
  const clientClosed = (p: Pair) => {
    if (current.kind === 'freeze' && !p.server.destroyed) p.clientGone = true;
    else destroy(p);
  };
  const forward = (p: Pair, to: net.Socket, chunk: Buffer) => {
    if (current.kind === 'stall' || current.kind === 'freeze') {
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
    const holding = () => current.kind === 'stall' || current.kind === 'freeze' || current.kind === 'deaf';
    for (let i = 0; i < n && p.held.length > 0 && !holding(); i++) {
      const { to, chunk } = p.held.shift()!;
      if (!to.destroyed) to.write(chunk);
    }
    if (p.clientGone && p.held.length === 0 && !holding()) p.server.end();
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
    client.on('error', () => clientClosed(p));
    client.on('close', () => clientClosed(p));
    conn.on('error', () => destroy(p));
    conn.on('close', () => destroy(p));
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
