// The servers the customer tests run against, installed on first use from their own lock file
// (never dependencies of Tollgate): a real SMTP server (smtp-server, by nodemailer's authors) whose
// mail is parsed with mailparser, and a certified OpenID provider (oidc-provider).
// Installed by first-use-install.ts, under its lock: the test files that use them run side by
// side, and a second `npm ci` into the folder deleted what the first was installing, while a check
// of two package.json files let a test load a half-installed folder; either failed that file's
// setup within seconds (issue #39: customers-billing, 7 of 7 in 3.8 s, in a full run).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { installOnFirstUse } from './first-use-install.ts';

const DIR = new URL('./customer-servers/', import.meta.url).pathname;

const ensureCustomerServers = () =>
  installOnFirstUse({ dir: DIR, label: 'the customer test servers (smtp-server, mailparser, oidc-provider)', ignoreScripts: true }, (line) =>
    process.stderr.write(`${line}\n`),
  );

/** A package of that folder (installed first if need be), through its own resolution (its package.json's exports). */
export async function load(name: string): Promise<any> {
  await ensureCustomerServers();
  return import(pathToFileURL(createRequire(`${DIR}package.json`).resolve(name)).href);
}

export interface Mail {
  to: string;
  subject: string;
  text: string;
}

/** An SMTP server on loopback that keeps every mail it is given. */
export async function startSmtpServer() {
  const { SMTPServer } = await load('smtp-server');
  const { simpleParser } = await load('mailparser');
  const mails: Mail[] = [];
  const waiters: Array<() => void> = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream: NodeJS.ReadableStream, _session: unknown, done: (err?: Error) => void) {
      simpleParser(stream)
        .then((m: { to: { text: string }; subject: string; text: string }) => {
          mails.push({ to: m.to.text, subject: m.subject, text: m.text });
          for (const w of waiters.splice(0)) w();
          done();
        })
        .catch(done);
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    mails,
    /** The next mail to this address; a mail that does not come within `timeoutMs` fails the test (uvu has no timeout of its own). */
    async mailTo(address: string, after = 0, timeoutMs = 30_000): Promise<Mail> {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const found = mails.slice(after).find((m) => m.to.includes(address));
        if (found) return found;
        const left = until - Date.now();
        if (left <= 0) throw new Error(`no mail to ${address} within ${timeoutMs / 1000} s (${mails.length} mails received in all)`);
        await new Promise<void>((r) => {
          const timer = setTimeout(r, left);
          waiters.push(() => {
            clearTimeout(timer);
            r();
          });
        });
      }
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/**
 * A certified OpenID provider (oidc-provider) on loopback with its development login and consent
 * pages: any login name is the address it vouches for (email_verified). `issuer` is known at once;
 * `register` names the one client and its redirect URI once the gateway runs.
 */
export async function startOidcProvider() {
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | null = null;
  const server = createServer((req, res) => handler?.(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { default: Provider } = await load('oidc-provider');
  return {
    issuer,
    clientId: 'tollgate',
    clientSecret: 'oidc-client-secret-0123456789',
    register(redirectUri: string) {
      const provider = new Provider(issuer, {
        clients: [
          {
            client_id: 'tollgate',
            client_secret: 'oidc-client-secret-0123456789',
            redirect_uris: [redirectUri],
            grant_types: ['authorization_code'],
            response_types: ['code'],
          },
        ],
        claims: { openid: ['sub'], email: ['email', 'email_verified'] },
        findAccount: (_ctx: unknown, id: string) => ({ accountId: id, claims: () => ({ sub: id, email: id, email_verified: true }) }),
      });
      handler = provider.callback();
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
