// The process log. JSON lines (pino) for machines: the default whenever standard output is not a
// terminal (a container, a pipe, a file) and under LOG_FORMAT=json. On a terminal, unless asked
// for JSON, the same lines are printed readably by pino-pretty, so they do not bury the banner.
import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { Settings } from './config.ts';

export function createLogger(settings: Pick<Settings, 'logLevel' | 'logFormat'>, out: { isTTY?: boolean } = process.stdout): Logger {
  const readable = settings.logFormat === 'pretty' || (settings.logFormat === undefined && out.isTTY === true);
  if (readable) return pino({ level: settings.logLevel }, pretty({ destination: 1, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }));
  // Written asynchronously: under load the writes coalesce into a few syscalls instead of one
  // synchronous write per request (pino flushes what is pending on exit).
  return pino({ level: settings.logLevel }, pino.destination({ dest: 1, sync: false }));
}
