// Sends sign-in links and account notices (balance alerts, failed top-ups): over SMTP through nodemailer when TOLLGATE_SMTP_URL is set, otherwise
// (as under `npm start`) printed to the gateway's console log, so a developer can sign in.
import nodemailer from 'nodemailer';
import type { Logger } from 'pino';

export interface SignInMail {
  to: string;
  link: string;
  minutes: number;
}

/** A notice to an account's people: one mail, every recipient in To (they share the account). */
export interface NoticeMail {
  to: string[];
  subject: string;
  text: string;
}

export interface Mailer {
  readonly via: 'smtp' | 'console';
  sendSignInLink(mail: SignInMail): Promise<void>;
  sendNotice(mail: NoticeMail): Promise<void>;
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
      async sendNotice(m) {
        opts.log.info({ recipients: m.to.length, subject: m.subject }, 'account notice (no TOLLGATE_SMTP_URL, so it is not mailed)');
      },
    };
  }
  const transport = nodemailer.createTransport(opts.smtpUrl);
  return {
    via: 'smtp',
    async sendSignInLink(m) {
      await transport.sendMail({ from: opts.from, to: m.to, subject: 'Your Tollgate sign-in link', text: text(m) });
    },
    async sendNotice(m) {
      await transport.sendMail({ from: opts.from, to: m.to, subject: m.subject, text: m.text });
    },
  };
}
