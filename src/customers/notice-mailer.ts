// Emails the account notices the log has raised (projections/accounts/notices.ts): a balance alert
// crossed, an auto top-up that failed. Each goes to the account's active members who may see its
// billing (owners and billing members), then NoticeEmailed records it on the account stream, once.
// Every gateway runs it, right after one of its own appends raises a notice and at each sweep. A
// mailer claims a notice on the account stream before sending it, so two gateways never both mail
// it; a mail that fails, or a mailer that dies, leaves it for a later sweep (once the claim lapses:
// src/accounts/balance-alerts.ts).
import type { Logger } from 'pino';
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { can } from '../ledger/roles.ts';
import { serialRuns } from '../serial-runs.ts';
import { accountCommand, accountState, unmailedNotices, type NoticeRow } from '../accounts/index.ts';
import { membersOf } from './members.ts';
import type { Mailer, NoticeMail } from './mailer.ts';

const BATCH = 50;
const RUNNER = 'system:notice-mailer';

/** The mail of a notice, for an account named `name`; `billingUrl`: where its people manage the account's billing. */
export function noticeMail(n: NoticeRow, name: string, billingUrl: string): Omit<NoticeMail, 'to'> {
  if (n.kind === 'balance_alert') {
    const threshold = n.threshold_tokens!.toLocaleString('en-US');
    return {
      subject: `Tollgate: ${name} has fewer than ${threshold} tokens left`,
      text:
        `The account ${name} (${n.account_id}) has ${n.tokens_left!.toLocaleString('en-US')} tokens left, below the alert you set at ${threshold} tokens.\n\n` +
        `Buy tokens or change the alerts at ${billingUrl}\n`,
    };
  }
  return {
    subject: `Tollgate: the auto top-up of ${name} failed`,
    text:
      `The automatic top-up ${n.notice_id} of the account ${name} (${n.account_id}) could not be charged: ${n.reason}\n\n` +
      `It is not tried again until auto top-up is set again. Check the card, or buy tokens, at ${billingUrl}\n`,
  };
}

export function createNoticeMailer(o: { ledger: Ledger; mailer: Mailer; log: Logger; process: string; publicOrigin: () => string | null }) {
  const { ledger, mailer, log } = o;
  const { db, schema } = ledger.readModels;

  async function recipients(accountId: string): Promise<string[]> {
    const { members } = await membersOf(ledger, accountId);
    return Object.values(members)
      .filter((m) => m.status === 'active' && can(m.role, 'billing'))
      .map((m) => m.email)
      .sort();
  }

  async function mailPending(): Promise<number> {
    let mailed = 0;
    for (const n of await unmailedNotices(db, schema, BATCH)) {
      try {
        const claim = { type: 'ClaimNotice' as const, noticeId: n.notice_id, by: o.process, now: new Date() };
        // Mailed or claimed elsewhere already: the read model had not caught up.
        if ((await accountCommand(ledger, n.account_id, claim, metadataFor(RUNNER))).events.length === 0) continue;
        const to = await recipients(n.account_id);
        if (to.length > 0) {
          const { name } = await accountState(ledger, n.account_id);
          await mailer.sendNotice({ to, ...noticeMail(n, name || n.account_id, `${o.publicOrigin() ?? ''}/app/billing`) });
        }
        // Without a mail server the notice is only logged: it reached no one.
        const reached = mailer.via === 'smtp' ? to.length : 0;
        await accountCommand(ledger, n.account_id, { type: 'RecordNoticeEmailed', noticeId: n.notice_id, recipients: reached }, metadataFor(RUNNER));
        mailed++;
      } catch (err) {
        log.warn({ err: (err as Error).message, noticeId: n.notice_id }, 'account notice not mailed yet; the next sweep tries again');
      }
    }
    return mailed;
  }

  return {
    /** Mails what is pending now, one pass at a time (serial-runs.ts). */
    run: serialRuns(mailPending),
  };
}

export type NoticeMailer = ReturnType<typeof createNoticeMailer>;
