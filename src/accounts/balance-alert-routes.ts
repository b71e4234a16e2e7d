// Balance alerts under /v1, for the account's own key: the thresholds of tokens left the account is
// alerted at (each crossing is emailed to its owners and billing members and sent to the
// operator's webhooks as balance.alert), and the alerts raised lately. The rule is the account
// decider's (src/accounts/balance-alerts.ts); these routes check the input and ask.
import type { Context } from 'koa';
import type { Ledger } from '../ledger/ledger.ts';
import { body } from '../http/admin-input.ts';
import { callerOf } from '../http/state.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { accountCommand, accountState } from './commands.ts';
import { tokensLeft } from './auto-top-up.ts';
import { requireAlertThresholds } from './balance-alerts.ts';
import { noticesOf } from '../../projections/accounts/notices.ts';

export function balanceAlertRoutes(ledger: Ledger) {
  async function view(accountId: string) {
    const s = await accountState(ledger, accountId);
    const { db, schema } = ledger.readModels;
    return {
      object: 'balance_alerts',
      account_id: accountId,
      thresholds_tokens: s.balanceAlerts ?? [],
      tokens_left: tokensLeft(s, new Date()),
      alerts: (await noticesOf(db, schema, accountId, 'balance_alert', 20)).map((n) => ({
        id: n.notice_id,
        threshold_tokens: n.threshold_tokens,
        tokens_left: n.tokens_left,
        raised_at: n.raised_at,
        emailed_at: n.emailed_at,
        recipients: n.recipients,
      })),
    };
  }

  return {
    get: async (ctx: Context) => {
      ctx.body = await view(callerOf(ctx).accountId);
    },
    /** Sets the thresholds: `thresholds_tokens`, up to five ([] turns the alerts off). */
    set: async (ctx: Context) => {
      const { accountId, actor } = callerOf(ctx);
      const thresholdsTokens = requireAlertThresholds(body(ctx).thresholds_tokens);
      await accountCommand(ledger, accountId, { type: 'SetBalanceAlerts', thresholdsTokens }, metadataFor(actor));
      ctx.body = await view(accountId);
    },
  };
}
