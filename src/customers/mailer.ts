// Sends sign-in links: over SMTP through nodemailer when TOLLGATE_SMTP_URL is set, otherwise
// (as under `npm start`) printed to the gateway's console log, so a developer can sign in.
import nodemailer from 'nodemailer';
import type { Logger } from 'pino';

export interface SignInMail {
  to: string;
  link: string;
  minutes: number;
}

export interface Mailer {
  readonly via: 'smtp' | 'console';
  sendSignInLink(mail: SignInMail): Promise<void>;
}

const text = (m: SignInMail) =>
  `Sign in to Tollgate with this link (it works once, within ${m.minutes} minutes):\n\n${m.link}\n\nIf you did not ask for it, ignore this mail.`;

export function createMailer(opts: { smtpUrl?: string; from: string; log: Logger }): Mailer {
  if (!opts.smtpUrl) {
    return {
      via: 'console',
      async sendSignInLink(m) {
        // No SMTP configured: the developer's console is the mailbox (never enabled with SMTP set).
        opts.log.warn(`sign-in link for ${m.to} (no TOLLGATE_SMTP_URL, so it is printed here): ${m.link}`);
      },
    };
  }
  const transport = nodemailer.createTransport(opts.smtpUrl);
  return {
    via: 'smtp',
    async sendSignInLink(m) {
      await transport.sendMail({ from: opts.from, to: m.to, subject: 'Your Tollgate sign-in link', text: text(m) });
    },
  };
}
