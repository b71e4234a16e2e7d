// Connections that never sent a byte: a browser's preconnect, an HTTP client's spare socket.
// Node's closeIdleConnections() leaves them open (they are waiting for a request), so a graceful
// shutdown would wait its whole grace period for requests that will never come. They are tracked
// here and closed at once when the server stops; a connection that has begun a request is not.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export function trackUnstartedConnections(server: Server): { closeAll(): void } {
  const open = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  return {
    closeAll() {
      for (const socket of open) if (socket.bytesRead === 0) socket.destroy();
    },
  };
}
