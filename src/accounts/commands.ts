// The commands of accounts and plans, sent through the base ledger with their deciders: opening
// an account, subscribing it, granting extra tokens, defining plans, and the account's state.
import { randomUUID } from 'node:crypto';
import type { EventMetadata, StreamRevision } from '../eventstore/port.ts';
import { StaleReadError } from '../eventstore/errors.ts';
import type { CommandOptions } from '../ledger/command-handler.ts';
import { DomainError } from '../ledger/errors.ts';
import { streams, type DomainEvent, type PlanTerms } from '../ledger/events.ts';
import { metadataFor, requireId, type Ledger } from '../ledger/ledger.ts';
import { accountDecider, type AccountCommand } from './account-decider.ts';
import type { AccountState } from './account-state.ts';
import type { CreditTerms } from './credits.ts';
import { planDecider } from './plan-decider.ts';

/** How often a decision that reads a plan is decided again because the plan kept changing under it. */
const PLAN_READ_ATTEMPTS = 10;

/** A command on an account's stream, through the account decider. */
export const accountCommand = (
  ledger: Ledger,
  accountId: string,
  command: AccountCommand,
  md: EventMetadata,
  eventIds?: (e: DomainEvent, i: number) => string,
  options: CommandOptions = {},
) => ledger.command(accountDecider, streams.account(accountId), command, md, eventIds, options);

/** An account command answered at its decision and again at its commit (CommandHandler.decideEarly). */
export const accountDecideEarly = (
  ledger: Ledger,
  accountId: string,
  command: AccountCommand,
  md: EventMetadata,
  options: { linger?: boolean; gone?: () => boolean } = {},
) => ledger.decideEarly(accountDecider, streams.account(accountId), command, md, options);

/**
 * The account as the log has it now. `cached`: this process's copy, unconfirmed, for a decision
 * that an append checks anyway, or that is confirmed (`confirmed: false` tells) before it refuses.
 */
export const accountState = (ledger: Ledger, accountId: string, options: { cached?: boolean } = {}): Promise<AccountState> =>
  ledger.streamState(accountDecider, streams.account(accountId), options);

/** The account's state with its revision and whether it is confirmed against the log (see accountState). */
export const accountStateChecked = (ledger: Ledger, accountId: string, options: { cached?: boolean } = {}) =>
  ledger.streamStateChecked(accountDecider, streams.account(accountId), options);

export async function openAccount(ledger: Ledger, input: { accountId?: string; name: string }, actor: string): Promise<string> {
  const accountId = requireId(input.accountId ?? `acct_${randomUUID().slice(0, 8)}`, 'account_id');
  await accountCommand(ledger, accountId, { type: 'Open', accountId, name: input.name }, metadataFor(actor));
  return accountId;
}

export const grantExtra = (ledger: Ledger, accountId: string, amount: number, reason: string, actor: string, terms: Partial<CreditTerms> = {}) =>
  accountCommand(ledger, accountId, { type: 'GrantExtra', accountId, amount, reason, terms }, metadataFor(actor));

export function definePlan(ledger: Ledger, terms: PlanTerms, actor: string) {
  requireId(terms.planId, 'plan_id');
  return ledger.command(planDecider, streams.plan(terms.planId), { type: 'Define', terms }, metadataFor(actor));
}

export function updatePlan(ledger: Ledger, terms: PlanTerms, actor: string) {
  requireId(terms.planId, 'plan_id');
  return ledger.command(planDecider, streams.plan(terms.planId), { type: 'Update', terms }, metadataFor(actor));
}

/** A plan's terms as the log has them now, with the revision they were read at. */
async function planAt(ledger: Ledger, planId: string): Promise<{ terms: PlanTerms; read: StreamRevision }> {
  const { state, revision } = await ledger.streamStateChecked(planDecider, streams.plan(planId));
  if (!state.terms) throw new DomainError('not_found', `plan ${planId} not found`);
  return { terms: state.terms, read: { stream: streams.plan(planId), revision } };
}

export const planTerms = async (ledger: Ledger, planId: string): Promise<PlanTerms> => (await planAt(ledger, planId)).terms;

/**
 * Runs a decision that reads a plan: it names the plan's revision, and when the plan changed
 * before the append committed (an update on another gateway) it reads the plan again and decides again.
 */
export async function withPlan<T>(ledger: Ledger, planId: string, decide: (plan: PlanTerms, read: StreamRevision) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const { terms, read } = await planAt(ledger, planId);
    try {
      return await decide(terms, read);
    } catch (err) {
      if (!(err instanceof StaleReadError) || attempt >= PLAN_READ_ATTEMPTS) throw err;
    }
  }
}

export const subscribe = (ledger: Ledger, accountId: string, planId: string, actor: string, now = new Date()) =>
  withPlan(ledger, planId, (plan, read) =>
    accountCommand(ledger, accountId, { type: 'Subscribe', accountId, plan: { ...plan, name: plan.name }, now }, metadataFor(actor), undefined, {
      unchanged: [read],
    }),
  );
