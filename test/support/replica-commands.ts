// The command kinds of the seeded random replica suite (test/replica-random.test.ts): for each, when
// it can be drawn, how its arguments are drawn from the PRNG and the model (preferring what the last
// steps touched), the request it sends to the gateway drawn for the step, what the model says the
// answer must be, and how the model follows the answer. Changes that another gateway must see at
// once are read back there in the same step (members, a revoked management key).
import { sessionCookieOf, signInLinkFrom, type Replica } from './replicas.ts';
import {
  activeOwners,
  applyRefund,
  applySubscription,
  MAY_BILL,
  MAY_READ_KEYS,
  newAccount,
  planAllows,
  refundWithdraws,
  sameSet,
  type AccountModel,
  type KeyModel,
  type LotModel,
  type ManagementKeyModel,
  type MemberModel,
  type Role,
} from './replica-model.ts';
import {
  CHAT_MODELS,
  errorCode,
  FIRST,
  IMAGE,
  LUNA,
  OPUS,
  PACK,
  PRICED_MODELS,
  PROMPTS,
  SECOND,
  TWO,
  type CommandKind,
  type Json,
  type ReplicaRun,
} from './replica-run.ts';

const PLAN_QUOTAS = [0, 30, 100, 300];
const PLAN_MODELS = [['*'], [LUNA, TWO, IMAGE], [OPUS, TWO]];
const ROLES: Role[] = ['owner', 'admin', 'billing', 'developer'];

const describeKey = (k: KeyModel) => `${k.handle}(${k.accountId},${k.status})`;

function lotsOf(r: ReplicaRun): Array<{ a: AccountModel; lot: LotModel }> {
  return r.userAccounts().flatMap((a) => a.lots.map((lot) => ({ a, lot })));
}

function pickLot(r: ReplicaRun, filter: (x: { a: AccountModel; lot: LotModel }) => boolean = () => true) {
  const all = lotsOf(r).filter(filter);
  return r.rng.pickPreferring(
    all,
    all.find((x) => x.lot === r.fresh('lot')),
  );
}

function pickMember(r: ReplicaRun, filter: (m: MemberModel) => boolean): MemberModel {
  const all = r.model.members.filter(filter);
  return r.rng.pickPreferring(all, r.fresh('member'));
}

function pickManagementKey(r: ReplicaRun, filter: (k: ManagementKeyModel) => boolean = () => true): ManagementKeyModel {
  const all = r.model.managementKeys.filter(filter);
  return r.rng.pickPreferring(all, r.fresh('mgmt'));
}

function planTerms(id: string, quota: number, models: string[]) {
  return { plan_id: id, name: `Plan ${id}`, quota, validity_days: 30, requests_per_minute: 100_000, models };
}

/** The new key of an issue, a creation or a rotation, in the model. */
function addKey(r: ReplicaRun, accountId: string, json: Json, from?: KeyModel): KeyModel {
  const key: KeyModel = {
    handle: `k${++r.counts.key}`,
    id: json.key_id,
    secret: json.key,
    accountId,
    status: 'active',
    rotated: false,
    pool: from ? from.pool : json.key_id,
    limit: from ? from.limit : null,
    models: from ? from.models : null,
  };
  r.model.keys.push(key);
  r.touch('key', key);
  return key;
}

/** A pack bought (manually, or by a code): its lot, and its tokens in the extra pool. */
function addPackLot(a: AccountModel, paymentId: string, reference: string, tokens: number, amount: number): LotModel {
  const lot: LotModel = { paymentId, reference, kind: 'pack', amount, tokens, refunded: 0, withdrawn: 0, extraStart: a.extraGranted, period: 0 };
  a.lots.push(lot);
  a.extraGranted += tokens;
  return lot;
}

const activeManagementKeys = (r: ReplicaRun, accountId: string): number =>
  r.model.managementKeys.filter((k) => k.accountId === accountId && k.status === 'active').length;

/** Who acts on a key: the operator mostly, else one of its account's management keys (mostly an active one). */
function managerOf(r: ReplicaRun, key: KeyModel): ManagementKeyModel | null {
  const managers = r.model.managementKeys.filter((k) => k.accountId === key.accountId);
  if (managers.length === 0 || !r.rng.chance(0.3)) return null;
  return r.rng.pickPreferring(
    managers,
    managers.find((x) => x.status === 'active'),
    0.8,
  );
}

const spendLimitOf = (json: Json): number | null => {
  const l = json.spend_limit ?? json.spendLimit ?? null;
  return l ? Number(l.tokens) : null;
};

export const COMMANDS: CommandKind[] = [
  // ---- accounts and plans
  {
    kind: 'open-account',
    weight: 3,
    ready: (r) => r.userAccounts().length < 4,
    draw(r) {
      const id = `acct-${++r.counts.account}`;
      return {
        args: id,
        async exec(g) {
          const res = await r.admin(g, 'POST', '/accounts', { account_id: id, name: `Account ${id}` });
          if (r.expectStatus(res, 201, `opening ${id}`)) {
            r.model.accounts.set(id, newAccount(id));
            r.touch('account', id);
          }
        },
      };
    },
  },
  {
    kind: 'define-plan',
    // At once while there is none (nothing can be called without a plan).
    weight: (r) => (userPlans(r).length === 0 ? 12 : 2),
    ready: (r) => userPlans(r).length < 3,
    draw(r) {
      const id = `plan-${++r.counts.plan}`;
      const quota = r.rng.pick(PLAN_QUOTAS);
      const models = r.rng.pick(PLAN_MODELS);
      return {
        args: `${id} quota ${quota} models ${models.join(',')}`,
        async exec(g) {
          const res = await r.admin(g, 'POST', '/plans', planTerms(id, quota, models));
          if (r.expectStatus(res, 201, `defining ${id}`)) {
            r.model.plans.set(id, { id, name: `Plan ${id}`, quota, models, defined: { quota, models } });
            r.touch('plan', id);
          }
        },
      };
    },
  },
  {
    kind: 'update-plan',
    weight: 4,
    ready: (r) => userPlans(r).length > 0,
    draw(r) {
      const plans = userPlans(r);
      const p = r.rng.pickPreferring(
        plans,
        plans.find((x) => x.id === r.fresh('plan')),
      );
      const back = r.rng.chance(0.4);
      const quota = back ? p.defined.quota : r.rng.pick(PLAN_QUOTAS);
      const models = back ? p.defined.models : r.rng.pick(PLAN_MODELS);
      return {
        args: `${p.id} quota ${quota} models ${models.join(',')}${back ? ' (put back)' : ''}`,
        async exec(g) {
          const changed = !(p.quota === quota && sameSet(p.models, models));
          const res = await r.admin(g, 'PUT', `/plans/${p.id}`, planTerms(p.id, quota, models));
          r.touch('plan', p.id);
          if (!r.expectStatus(res, 200, `updating ${p.id}`)) return;
          r.expect(
            res.json.changed === changed,
            () => `updating ${p.id} (quota ${p.quota} -> ${quota}, models ${p.models} -> ${models}): changed should be ${changed}, ${res.show}`,
          );
          if (res.json.changed) Object.assign(p, { quota, models });
        },
      };
    },
  },
  {
    kind: 'subscribe',
    // More often while accounts have no plan.
    weight: (r) => (r.userAccounts().some((a) => !a.plan) ? 8 : 4),
    ready: (r) => r.userAccounts().length > 0 && userPlans(r).length > 0,
    draw(r) {
      const a = r.pickAccount();
      const plans = userPlans(r);
      const p = r.rng.pickPreferring(
        plans,
        plans.find((x) => x.id === r.fresh('plan')),
      );
      return {
        args: `${a.id} to ${p.id}`,
        async exec(g) {
          const res = await r.admin(g, 'POST', `/accounts/${a.id}/subscription`, { plan_id: p.id });
          r.touch('account', a.id);
          if (!r.expectStatus(res, 200, `subscribing ${a.id} to ${p.id}`)) return;
          const event = a.plan ? 'SubscriptionRenewed' : 'SubscriptionStarted';
          r.expect(
            res.json.event === event && Number(res.json.quota) === p.quota && sameSet(res.json.models, p.models),
            () =>
              `subscribing ${a.id} to ${p.id}: expected ${event} with quota ${p.quota} and models ${p.models.join(',')} (the plan's terms now), ${res.show}`,
          );
          applySubscription(a, { id: p.id, quota: Number(res.json.quota), models: res.json.models });
        },
      };
    },
  },
  {
    kind: 'grant',
    weight: 4,
    ready: (r) => r.userAccounts().length > 0,
    draw(r) {
      const a = r.pickAccount();
      const amount = r.rng.pick([20, 60, 150, 400]);
      return {
        args: `${a.id} +${amount}`,
        async exec(g) {
          const res = await r.admin(g, 'POST', `/accounts/${a.id}/extra-tokens`, { amount, reason: 'replica-random' });
          r.touch('account', a.id);
          if (r.expectStatus(res, 200, `granting ${amount} to ${a.id}`)) a.extraGranted += amount;
        },
      };
    },
  },
  // ---- money: payments, refunds, disputes, codes
  {
    kind: 'payment',
    weight: 4,
    ready: (r) => r.userAccounts().length > 0,
    draw(r) {
      const a = r.pickAccount();
      // Sent again as it was first sent (a pack), with the same reference: recorded once.
      const manual = a.lots.filter((l) => l.reference.startsWith('ref-') && l.kind === 'pack');
      const variant = manual.length > 0 && r.rng.chance(0.1) ? 'again' : userPlans(r).length > 0 && r.rng.chance(0.3) ? 'plan' : 'pack';
      if (variant === 'again') {
        const lot = r.rng.pick(manual);
        return {
          args: `${a.id} ${lot.reference} again`,
          async exec(g) {
            const res = await r.admin(g, 'POST', `/accounts/${a.id}/payments`, {
              reference: lot.reference,
              amount: lot.amount,
              currency: 'USD',
              fee: 0,
              pack_id: PACK.id,
            });
            r.expect(
              res.status === 200 && res.json.already_recorded === true,
              () => `recording ${lot.reference} again: expected 200 already_recorded, ${res.show}`,
            );
          },
        };
      }
      const reference = `ref-${++r.counts.ref}`;
      if (variant === 'plan') {
        const plans = userPlans(r);
        const p = r.rng.pickPreferring(
          plans,
          plans.find((x) => x.id === r.fresh('plan')),
        );
        const amount = p.quota > 0 ? p.quota : 100;
        return {
          args: `${a.id} ${reference} plan ${p.id} for ${amount}`,
          async exec(g) {
            const res = await r.admin(g, 'POST', `/accounts/${a.id}/payments`, { reference, amount, currency: 'USD', fee: 0, plan_id: p.id });
            r.touch('account', a.id);
            if (!r.expectStatus(res, 201, `a payment for ${p.id} on ${a.id}`)) return;
            const tokens = Number(res.json.item?.tokens);
            r.expect(
              tokens === p.quota && res.json.already_recorded === false,
              () => `a payment for ${p.id}: expected ${p.quota} tokens (the plan's quota now), ${res.show}`,
            );
            const period = applySubscription(a, { id: p.id, quota: tokens, models: p.models });
            const lot: LotModel = { paymentId: res.json.id, reference, kind: 'plan', amount, tokens, refunded: 0, withdrawn: 0, extraStart: 0, period };
            a.lots.push(lot);
            r.touch('lot', lot);
          },
        };
      }
      return {
        args: `${a.id} ${reference} pack ${PACK.id}`,
        async exec(g) {
          const res = await r.admin(g, 'POST', `/accounts/${a.id}/payments`, { reference, amount: PACK.amount, currency: 'USD', fee: 0, pack_id: PACK.id });
          r.touch('account', a.id);
          if (!r.expectStatus(res, 201, `a payment for ${PACK.id} on ${a.id}`)) return;
          r.expect(Number(res.json.item?.tokens) === PACK.tokens && res.json.already_recorded === false, () => `a pack payment: ${res.show}`);
          r.touch('lot', addPackLot(a, res.json.id, reference, PACK.tokens, PACK.amount));
        },
      };
    },
  },
  {
    kind: 'refund',
    weight: 3,
    ready: (r) => lotsOf(r).some((x) => x.lot.refunded < x.lot.amount),
    draw(r) {
      const { a, lot } = pickLot(r, (x) => x.lot.refunded < x.lot.amount);
      const left = lot.amount - lot.refunded;
      const over = r.rng.chance(0.1);
      const amount = over ? left + r.rng.int(1, 50) : r.rng.chance(0.4) ? left : r.rng.int(1, left);
      const refundId = `rf-${++r.counts.refund}`;
      return {
        args: `${a.id} ${lot.reference} ${amount} of ${left} left (${refundId})`,
        async exec(g) {
          const res = await r.admin(g, 'POST', `/accounts/${a.id}/payments/${lot.paymentId}/refunds`, { amount, refund_id: refundId });
          r.touch('lot', lot);
          r.touch('account', a.id);
          const withdrawn = refundWithdraws(a, lot, amount);
          if (over) r.expectStatus(res, 400, `refunding ${amount} of a payment with ${left} left`);
          else if (r.expectStatus(res, 201, `refunding ${amount} of ${lot.reference} (${lot.paymentId})`))
            r.expect(
              Number(res.json.tokensWithdrawn) === withdrawn,
              () => `refunding ${amount} of ${lot.reference}: expected ${withdrawn} tokens withdrawn, ${res.show}`,
            );
          if (res.status !== 201) return;
          applyRefund(a, lot, amount, Number(res.json.tokensWithdrawn));
        },
      };
    },
  },
  {
    kind: 'dispute-open',
    weight: 2,
    ready: (r) => lotsOf(r).length > 0,
    draw(r) {
      const { a, lot } = pickLot(r);
      const amount = Math.max(1, lot.amount - lot.refunded);
      const suspends = r.rng.chance(0.7);
      const id = `dp-${++r.counts.dispute}`;
      return {
        args: `${a.id} ${lot.reference} ${amount} ${id}${suspends ? ' (suspends keys)' : ''}`,
        async exec(g) {
          const res = await r.admin(g, 'POST', `/accounts/${a.id}/payments/${lot.paymentId}/disputes`, { dispute_id: id, amount, suspend_keys: suspends });
          r.touch('account', a.id);
          if (!r.expectStatus(res, 200, `opening ${id} on ${lot.reference}`)) return;
          r.expect(JSON.stringify(res.json.events) === '["PaymentDisputed"]', () => `opening ${id}: ${res.show}`);
          a.disputes.push({ id, paymentId: lot.paymentId, amount: Math.min(amount, lot.amount), suspends, outcome: null });
        },
      };
    },
  },
  {
    kind: 'dispute-close',
    weight: 3,
    ready: (r) => r.userAccounts().some((a) => a.disputes.some((d) => d.outcome === null)),
    draw(r) {
      const open = r.userAccounts().flatMap((a) => a.disputes.filter((d) => d.outcome === null).map((d) => ({ a, d })));
      const { a, d } = r.rng.pick(open);
      const outcome = r.rng.chance(0.5) ? 'won' : 'lost';
      return {
        args: `${a.id} ${d.id} ${outcome}`,
        async exec(g) {
          const res = await r.admin(g, 'POST', `/accounts/${a.id}/disputes/${d.id}/close`, { outcome, fee: 0 });
          r.touch('account', a.id);
          if (!r.expectStatus(res, 200, `closing ${d.id} as ${outcome}`)) return;
          const events = res.json.events as Json[];
          const lot = a.lots.find((l) => l.paymentId === d.paymentId)!;
          const amount = outcome === 'lost' ? Math.min(d.amount, lot.amount - lot.refunded) : 0;
          const types = amount > 0 ? ['DisputeClosed', 'PaymentRefunded'] : ['DisputeClosed'];
          r.expect(
            JSON.stringify(events.map((e) => e.type)) === JSON.stringify(types),
            () => `closing ${d.id} as ${outcome}: expected ${types.join(', ')}, ${res.show}`,
          );
          d.outcome = outcome;
          const refund = events.find((e) => e.type === 'PaymentRefunded');
          if (refund) {
            const withdrawn = refundWithdraws(a, lot, Number(refund.amount));
            r.expect(Number(refund.tokensWithdrawn) === withdrawn, () => `closing ${d.id} as lost: expected ${withdrawn} tokens withdrawn, ${res.show}`);
            applyRefund(a, lot, Number(refund.amount), Number(refund.tokensWithdrawn));
          }
        },
      };
    },
  },
  {
    kind: 'mint-code',
    weight: 1,
    ready: (r) => r.model.codes.filter((c) => !c.used).length < 3,
    draw(r) {
      return {
        args: `a code for ${PACK.id}`,
        async exec(g) {
          const res = await r.admin(g, 'POST', '/code-batches', { count: 1, pack_id: PACK.id, amount: PACK.amount });
          if (r.expectStatus(res, 201, 'minting a code')) r.model.codes.push({ code: res.json.codes[0], used: false });
        },
      };
    },
  },
  {
    kind: 'redeem-code',
    weight: 1.5,
    ready: (r) => r.model.codes.length > 0 && r.userKeys().length > 0,
    draw(r) {
      const unused = r.model.codes.filter((c) => !c.used);
      const used = r.model.codes.filter((c) => c.used);
      const c = unused.length > 0 && (used.length === 0 || r.counts.usedCodes >= 3 || r.rng.chance(0.85)) ? r.rng.pick(unused) : r.rng.pick(used);
      if (c.used) r.counts.usedCodes++;
      const key = r.pickKey();
      return {
        args: `${c.used ? 'a used code' : 'a new code'} with ${describeKey(key)}`,
        async exec(g) {
          const res = await r.call(g, '/v1/redemptions', { key: key.secret, body: { code: c.code } });
          const a = r.account(key.accountId);
          if (key.status !== 'active') r.expectStatus(res, 401, `redeeming with the revoked ${key.handle}`);
          else if (c.used)
            r.expect(res.status === 400 && errorCode(res) === 'invalid_code', () => `redeeming a used code: expected 400 invalid_code, ${res.show}`);
          else r.expectStatus(res, 201, `redeeming a new code on ${a.id}`);
          if (res.status !== 201) return;
          c.used = true;
          r.touch('lot', addPackLot(a, res.json.payment.id, 'code', Number(res.json.payment.item.tokens), Number(res.json.payment.amount)));
          r.touch('account', a.id);
        },
      };
    },
  },
  // ---- keys
  {
    kind: 'issue-key',
    // More often while few keys can call.
    weight: (r) => (r.userKeys().filter((k) => k.status === 'active').length < 3 ? 8 : 2),
    ready: (r) => r.userAccounts().some((a) => r.keysOf(a.id).length < 6),
    draw(r) {
      const a = r.pickAccount((x) => r.keysOf(x.id).length < 6);
      return {
        args: a.id,
        async exec(g) {
          const res = await r.admin(g, 'POST', `/accounts/${a.id}/keys`, { name: 'app' });
          if (r.expectStatus(res, 201, `issuing a key of ${a.id}`)) addKey(r, a.id, res.json);
        },
      };
    },
  },
  {
    kind: 'create-key-by-management-key',
    weight: 2,
    ready: (r) => r.model.managementKeys.some((k) => r.keysOf(k.accountId).length < 6),
    draw(r) {
      const m = pickManagementKey(r, (k) => r.keysOf(k.accountId).length < 6);
      const limit = r.rng.chance(0.3) ? r.rng.pick([50, 150, 400]) : null;
      return {
        args: `with ${m.handle}(${m.accountId},${m.status})${limit !== null ? ` limit ${limit}` : ''}`,
        async exec(g) {
          const res = await r.call(g, '/v1/keys', {
            method: 'POST',
            key: m.secret,
            body: { name: 'user', ...(limit !== null ? { spend_limit: { tokens: limit, period: 'none' } } : {}) },
          });
          r.touch('mgmt', m);
          if (m.status !== 'active') r.expectStatus(res, 401, `creating a key with the revoked management key ${m.handle}`);
          else if (r.expectStatus(res, 201, `creating a key with ${m.handle}`))
            r.expect(spendLimitOf(res.json) === limit, () => `creating a key with limit ${limit}: ${res.show}`);
          if (res.status !== 201) return;
          const key = addKey(r, m.accountId, res.json);
          key.limit = spendLimitOf(res.json);
        },
      };
    },
  },
  {
    kind: 'revoke-key',
    weight: 2.5,
    ready: (r) => r.userKeys().length > 0,
    draw(r) {
      const key = r.pickKey();
      const m = managerOf(r, key);
      return {
        args: `${describeKey(key)}${m ? ` with ${m.handle}(${m.status})` : ' (admin)'}`,
        async exec(g) {
          const res = m
            ? await r.call(g, `/v1/keys/${key.id}`, { method: 'DELETE', key: m.secret })
            : await r.admin(g, 'POST', `/keys/${key.id}/revoke`, { reason: 'replica-random' });
          r.touch('key', key);
          if (m && m.status !== 'active') r.expectStatus(res, 401, `revoking with the revoked management key ${m.handle}`);
          else if (key.status !== 'active') r.expectStatus(res, 409, `revoking ${key.handle} again`);
          else r.expectStatus(res, 200, `revoking ${key.handle}`);
          if (res.status === 200) key.status = 'revoked';
        },
      };
    },
  },
  {
    kind: 'rotate-key',
    weight: 1.5,
    ready: (r) => r.userKeys().some((k) => r.keysOf(k.accountId).length < 6),
    draw(r) {
      const key = r.pickKey((k) => r.keysOf(k.accountId).length < 6);
      return {
        args: describeKey(key),
        async exec(g) {
          const res = await r.admin(g, 'POST', `/keys/${key.id}/rotate`, { grace_seconds: 0 });
          r.touch('key', key);
          if (key.status !== 'active' || key.rotated) r.expectStatus(res, 409, `rotating ${key.handle} (${key.status}${key.rotated ? ', rotated' : ''})`);
          else if (r.expectStatus(res, 201, `rotating ${key.handle}`))
            r.expect(
              spendLimitOf(res.json) === key.limit && JSON.stringify(res.json.models ?? null) === JSON.stringify(key.models),
              () => `rotating ${key.handle}: the new key should carry limit ${key.limit} and models ${key.models}, ${res.show}`,
            );
          if (res.status !== 201) return;
          key.status = 'revoked';
          key.rotated = true;
          addKey(r, key.accountId, res.json, key);
        },
      };
    },
  },
  {
    kind: 'key-controls',
    weight: 3,
    ready: (r) => r.userKeys().length > 0,
    draw(r) {
      const key = r.pickKey();
      const variant = r.rng.weighted([
        ['limit', 2],
        ['no-limit', 2],
        ['models', 2],
        ['all-models', 1],
      ] as const);
      const limit = variant === 'limit' ? r.rng.pick([0, 60, 300, 2000]) : null;
      const models = variant === 'models' ? PRICED_MODELS.filter(() => r.rng.chance(0.5)) : null;
      if (models && models.length === 0) models.push(r.rng.pick(CHAT_MODELS));
      const patch = variant === 'limit' || variant === 'no-limit' ? { spend_limit: limit === null ? null : { tokens: limit, period: 'none' } } : { models };
      const m = managerOf(r, key);
      return {
        args: `${describeKey(key)} ${JSON.stringify(patch)}${m ? ` with ${m.handle}(${m.status})` : ' (admin)'}`,
        async exec(g) {
          const res = m
            ? await r.call(g, `/v1/keys/${key.id}`, { method: 'PATCH', key: m.secret, body: patch })
            : await r.admin(g, 'PATCH', `/keys/${key.id}`, patch);
          r.touch('key', key);
          const a = r.account(key.accountId);
          const bad = (models ?? []).filter((id) => r.model.catalog.get(id)!.status !== 'ACTIVE' || !a.plan || !planAllows(a.plan.models, id));
          if (m && m.status !== 'active') r.expectStatus(res, 401, `changing a key with the revoked management key ${m.handle}`);
          else if (key.status !== 'active') r.expectStatus(res, 409, `changing the revoked ${key.handle}`);
          else if (bad.length > 0)
            r.expectStatus(
              res,
              400,
              `giving ${key.handle} the models ${models!.join(',')} (${bad.join(',')} inactive or outside the plan ${a.plan?.models.join(',') ?? 'none'})`,
            );
          else if (r.expectStatus(res, 200, `changing ${key.handle}'s controls`)) {
            const changed =
              'spend_limit' in patch ? key.limit !== limit : !(models === null ? key.models === null : key.models !== null && sameSet(key.models, models));
            r.expect(
              res.json.changed.length > 0 === changed,
              () => `changing ${key.handle} (limit ${key.limit}, models ${key.models}): changed should be ${changed ? 'non-empty' : 'empty'}, ${res.show}`,
            );
          }
          if (res.status !== 200) return;
          key.limit = spendLimitOf(res.json);
          key.models = res.json.models ?? null;
        },
      };
    },
  },
  // ---- management keys
  {
    kind: 'issue-management-key',
    weight: 2,
    ready: (r) => r.userAccounts().some((a) => activeManagementKeys(r, a.id) < 3),
    draw(r) {
      const a = r.pickAccount((x) => activeManagementKeys(r, x.id) < 3);
      return {
        args: a.id,
        async exec(g) {
          const res = await r.admin(g, 'POST', `/accounts/${a.id}/management-keys`, { name: 'provisioning' });
          if (!r.expectStatus(res, 201, `issuing a management key of ${a.id}`)) return;
          const m: ManagementKeyModel = { handle: `mk${++r.counts.mgmt}`, id: res.json.key_id, secret: res.json.key, accountId: a.id, status: 'active' };
          r.model.managementKeys.push(m);
          r.touch('mgmt', m);
        },
      };
    },
  },
  {
    kind: 'revoke-management-key',
    weight: 2,
    ready: (r) => r.model.managementKeys.length > 0,
    draw(r) {
      const m = pickManagementKey(r);
      const usedOn = r.rng.pick(r.o.gateways);
      return {
        args: `${m.handle}(${m.accountId},${m.status}), then used on ${usedOn.name}`,
        async exec(g) {
          const res = await r.admin(g, 'POST', `/accounts/${m.accountId}/management-keys/${m.id}/revoke`, {});
          r.touch('mgmt', m);
          if (!r.expectStatus(res, 200, `revoking the management key ${m.handle} (${m.status})`)) return;
          m.status = 'revoked';
          const used = await r.call(usedOn, '/v1/keys', { key: m.secret });
          r.expectStatus(used, 401, `the management key ${m.handle} revoked on ${g.name}, used on ${usedOn.name}`);
        },
      };
    },
  },
  {
    kind: 'use-management-key',
    weight: 2,
    ready: (r) => r.model.managementKeys.length > 0,
    draw(r) {
      const m = pickManagementKey(r);
      return {
        args: `${m.handle}(${m.accountId},${m.status}) lists the keys`,
        async exec(g) {
          const res = await r.call(g, '/v1/keys', { key: m.secret });
          r.touch('mgmt', m);
          if (m.status !== 'active') return void r.expectStatus(res, 401, `listing with the revoked management key ${m.handle}`);
          if (!r.expectStatus(res, 200, `listing keys with ${m.handle}`)) return;
          const got = (res.json.data as Json[]).map((k) => `${k.key_id}:${k.status}`);
          const want = r.keysOf(m.accountId).map((k) => `${k.id}:${k.status}`);
          r.expect(sameSet(got, want), () => `the keys of ${m.accountId} listed with ${m.handle}: ${got.join(' ')}, the model has ${want.join(' ')}`);
        },
      };
    },
  },
  // ---- members
  {
    kind: 'invite',
    weight: 3,
    ready: (r) => r.userAccounts().length > 0,
    draw(r) {
      // Often the account whose members the last steps changed (another gateway may hold its members' stream).
      const last = r.fresh('member');
      const a = last && r.rng.chance(0.5) ? r.account(last.accountId) : r.pickAccount();
      const role = r.rng.pick(ROLES);
      const known = r.model.members.filter((m) => m.accountId === a.id);
      const again = known.length > 0 && r.rng.chance(0.15) ? r.rng.pick(known) : null;
      const email = again ? again.email : `m${r.counts.member + 1}-s${r.o.seed}@replica-random.test`;
      const back = readBack(r);
      return {
        args: `${email} to ${a.id} as ${role}${again ? ` (already ${again.status})` : ''}${back ? `, then read on ${back.name}` : ''}`,
        async exec(g) {
          const res = await r.admin(g, 'POST', `/accounts/${a.id}/members`, { email, role });
          r.touch('account', a.id);
          if (again && again.status !== 'removed') r.expectStatus(res, 409, `inviting ${email} again`);
          else r.expectStatus(res, 201, `inviting ${email} to ${a.id}`);
          if (res.status === 201) {
            const m: MemberModel = { handle: `m${++r.counts.member}`, id: res.json.member_id, accountId: a.id, email, role, status: 'invited', cookie: null };
            r.model.members.push(m);
            r.touch('member', m);
          }
          if (back) await r.checkMembers(back, a.id, `after the invitation on ${g.name}`);
        },
      };
    },
  },
  {
    kind: 'join',
    weight: 3,
    ready: (r) => r.counts.signIns < 8 && r.model.members.some((m) => m.status === 'invited'),
    draw(r, g) {
      const m = pickMember(r, (x) => x.status === 'invited');
      const verifyOn = r.rng.pick(r.o.gateways);
      r.counts.signIns++;
      return {
        args: `${m.handle} ${m.email} (${m.accountId}, ${m.role}): link asked on ${g.name}, used on ${verifyOn.name}`,
        async exec(g) {
          r.touch('member', m);
          const from = g.process.output().length;
          const asked = await r.call(g, '/app/api/sign-in/email', { method: 'POST', body: { email: m.email } });
          if (!r.expectStatus(asked, 202, `asking a sign-in link for ${m.email}`)) return;
          const link = await signInLinkFrom(g, m.email, from);
          const verified = await r.call(verifyOn, '/app/api/sign-in/email/verify', { method: 'POST', body: link });
          if (!r.expectStatus(verified, 200, `${m.email}, invited to ${m.accountId}, signing in on ${verifyOn.name}`)) return;
          const cookie = sessionCookieOf(verified);
          for (const x of r.model.members) if (x.email === m.email && x.status === 'invited') x.status = 'active';
          for (const x of r.model.members) if (x.email === m.email) x.cookie = cookie;
          const session = await r.call(verifyOn, '/app/api/session', { headers: { cookie } });
          if (!r.expectStatus(session, 200, `the session of ${m.email}`)) return;
          const got = (session.json.accounts as Json[]).map((x) => `${x.account_id}:${x.member_id}:${x.role}`);
          const want = r.model.members.filter((x) => x.email === m.email && x.status === 'active').map((x) => `${x.accountId}:${x.id}:${x.role}`);
          r.expect(sameSet(got, want), () => `the session of ${m.email} on ${verifyOn.name}: ${got.join(' ')}, the model has ${want.join(' ')}`);
        },
      };
    },
  },
  {
    kind: 'change-role',
    weight: 3,
    ready: (r) => r.model.members.length > 0,
    draw(r) {
      const m = pickMember(r, () => true);
      // Put back (the role before the last change) sometimes, the same role sometimes.
      const role = m.previousRole && r.rng.chance(0.4) ? m.previousRole : r.rng.chance(0.15) ? m.role : r.rng.pick(ROLES.filter((x) => x !== m.role));
      // Always read back (a role change whose answer looks right but wrote nothing shows only there).
      const back = r.rng.pick(r.o.gateways);
      return {
        args: `${m.handle}(${m.accountId},${m.role},${m.status}) to ${role}, then read on ${back.name}`,
        async exec(g) {
          const res = await r.admin(g, 'PATCH', `/accounts/${m.accountId}/members/${m.id}`, { role });
          r.touch('member', m);
          if (m.status === 'removed') r.expectStatus(res, 404, `changing the role of the removed ${m.handle}`);
          else if (m.status === 'active' && m.role === 'owner' && role !== 'owner' && activeOwners(r.model, m.accountId) === 1)
            r.expectStatus(res, 409, `demoting ${m.handle}, the last owner of ${m.accountId}`);
          else if (r.expectStatus(res, 200, `changing ${m.handle}'s role to ${role}`))
            r.expect(res.json.role === role, () => `${m.handle} made ${role}: the answer says ${res.json.role}, ${res.show}`);
          // The answer's role is what the log holds now.
          if (res.status === 200 && res.json.role !== m.role) [m.previousRole, m.role] = [m.role, res.json.role];
          await r.checkMembers(back, m.accountId, `after the role change on ${g.name}`);
        },
      };
    },
  },
  {
    kind: 'remove-member',
    weight: 1.5,
    ready: (r) => r.model.members.length > 0,
    draw(r) {
      const m = pickMember(r, () => true);
      const back = readBack(r);
      return {
        args: `${m.handle}(${m.accountId},${m.role},${m.status})${back ? `, then read on ${back.name}` : ''}`,
        async exec(g) {
          const res = await r.admin(g, 'DELETE', `/accounts/${m.accountId}/members/${m.id}`);
          r.touch('member', m);
          if (m.status === 'removed') r.expectStatus(res, 404, `removing the removed ${m.handle}`);
          else if (m.status === 'active' && m.role === 'owner' && activeOwners(r.model, m.accountId) === 1)
            r.expectStatus(res, 409, `removing ${m.handle}, the last owner of ${m.accountId}`);
          else r.expectStatus(res, 200, `removing ${m.handle}`);
          if (res.status === 200) m.status = 'removed';
          if (back) await r.checkMembers(back, m.accountId, `after the removal on ${g.name}`);
        },
      };
    },
  },
  {
    kind: 'member-reads',
    weight: 2,
    ready: (r) => r.model.members.some((m) => m.cookie),
    draw(r) {
      const m = pickMember(r, (x) => !!x.cookie);
      const what = r.rng.chance(0.5) ? 'keys' : 'payments';
      return {
        args: `${m.handle}(${m.accountId},${m.role},${m.status}) reads the ${what}`,
        async exec(g) {
          const res = await r.call(g, `/app/api/accounts/${m.accountId}/${what}`, { headers: { cookie: m.cookie! } });
          r.touch('member', m);
          const may = m.status === 'active' && (what === 'keys' ? MAY_READ_KEYS : MAY_BILL).includes(m.role);
          if (!may) return void r.expectStatus(res, 403, `${m.handle} (${m.role}, ${m.status}) reading the ${what} of ${m.accountId}`);
          if (!r.expectStatus(res, 200, `${m.handle} (${m.role}) reading the ${what} of ${m.accountId}`)) return;
          const a = r.account(m.accountId);
          const got = (res.json.data as Json[]).map((x) => (what === 'keys' ? `${x.key_id}:${x.status}` : `${x.id}:${x.refunded}`));
          const want = what === 'keys' ? r.keysOf(a.id).map((k) => `${k.id}:${k.status}`) : a.lots.map((l) => `${l.paymentId}:${l.refunded}`);
          r.expect(sameSet(got, want), () => `the ${what} of ${a.id} as ${m.handle} reads them: ${got.join(' ')}, the model has ${want.join(' ')}`);
        },
      };
    },
  },
  // ---- reads: what one gateway says of an account, against the model (and that gateway's copy of
  // the stream loaded, so that a change made elsewhere next is decided against it)
  {
    kind: 'read',
    weight: 4,
    ready: (r) => r.userAccounts().length > 0,
    draw(r) {
      const a = r.pickAccount();
      const what = r.rng.pick(['members', 'management-keys', 'payments', 'keys', 'balance'] as const);
      return {
        args: `the ${what} of ${a.id}`,
        async exec(g) {
          r.touch('account', a.id);
          if (what === 'members') await r.checkMembers(g, a.id, 'read');
          else if (what === 'management-keys') await r.checkManagementKeys(g, a);
          else if (what === 'payments') await r.checkPayments(g, a);
          else if (what === 'keys') await r.checkKeys(g, a);
          else await r.checkBalance(g, a);
        },
      };
    },
  },
  // ---- the catalogue: prices, model states, channels
  {
    kind: 'price-model',
    weight: 3,
    ready: () => true,
    draw(r) {
      const entry = r.model.catalog.get(r.rng.pickPreferring(PRICED_MODELS, r.fresh('model'), 0.4))!;
      const milli = r.rng.chance(0.45) ? entry.original : r.rng.pick([entry.original * 2, Math.round(entry.original * 1.5)]);
      return {
        args: `${entry.id} ${entry.milli} -> ${milli}${milli === entry.original ? ' (put back)' : ''}`,
        async exec(g) {
          const res = await r.admin(g, 'PATCH', `/models/${entry.id}`, { multiplier: milli / 1000 });
          r.touch('model', entry.id);
          if (!r.expectStatus(res, 200, `pricing ${entry.id}`)) return;
          const changed = milli !== entry.milli;
          r.expect(
            res.json.changed === changed && res.json.multiplierMilli === milli,
            () => `pricing ${entry.id} from ${entry.milli} to ${milli}: expected changed ${changed} and ${milli}, ${res.show}`,
          );
          if (res.json.changed) entry.milli = milli;
        },
      };
    },
  },
  {
    kind: 'model-status',
    weight: 2,
    ready: () => true,
    draw(r) {
      const entry = r.model.catalog.get(r.rng.pickPreferring(PRICED_MODELS, r.fresh('model'), 0.4))!;
      // Put back more often than taken out, so that models are mostly callable; the same status again sometimes.
      const status = entry.status === 'INACTIVE' ? (r.rng.chance(0.8) ? 'ACTIVE' : 'INACTIVE') : r.rng.chance(0.6) ? 'INACTIVE' : 'ACTIVE';
      return {
        args: `${entry.id} ${entry.status} -> ${status}`,
        async exec(g) {
          const res = await r.admin(g, 'PATCH', `/models/${entry.id}`, { status });
          r.touch('model', entry.id);
          if (!r.expectStatus(res, 200, `setting ${entry.id} ${status}`)) return;
          const changed = status !== entry.status;
          r.expect(
            res.json.changed === changed && res.json.status === status,
            () => `setting ${entry.id} from ${entry.status} to ${status}: expected changed ${changed}, ${res.show}`,
          );
          if (res.json.changed) entry.status = status;
        },
      };
    },
  },
  {
    kind: 'channel',
    weight: 2.5,
    ready: () => true,
    draw(r) {
      const id = r.rng.pick([FIRST, SECOND]);
      const c = r.model.channels.get(id)!;
      const enabled = c.enabled ? r.rng.chance(0.3) : r.rng.chance(0.8);
      return {
        args: `${id} ${c.enabled ? 'enabled' : 'disabled'} -> ${enabled ? 'enabled' : 'disabled'}`,
        async exec(g) {
          const res = await r.admin(g, 'PATCH', `/channels/${id}`, { enabled, reason: 'replica-random' });
          r.touch('model', TWO);
          if (!r.expectStatus(res, 200, `switching ${id}`)) return;
          const changed = enabled !== c.enabled;
          r.expect(
            res.json.changed === changed && (res.json.state === 'disabled') === !enabled,
            () => `switching ${id} from ${c.enabled ? 'enabled' : 'disabled'} to ${enabled ? 'enabled' : 'disabled'}: expected changed ${changed}, ${res.show}`,
          );
          if (res.json.changed) c.enabled = enabled;
        },
      };
    },
  },
  // ---- calls
  ...(['chat', 'chat-stream'] as const).map((kind): CommandKind => ({
    kind,
    weight: kind === 'chat' ? 18 : 9,
    ready: (r) => r.userKeys().length > 0,
    draw(r) {
      const key = pickCallKey(r);
      const modelId = pickCallModel(r, key, CHAT_MODELS);
      const prompt = r.rng.pick(PROMPTS);
      const maxTokens = r.rng.pick([8, 16]);
      return {
        args: `${describeKey(key)} ${modelId} max ${maxTokens} "${prompt}"`,
        exec: (g) => r.chat(g, key, modelId, prompt, maxTokens, kind === 'chat-stream', r.requestId(kind)),
      };
    },
  })),
  {
    kind: 'image',
    weight: 3,
    ready: (r) => r.userKeys().length > 0,
    draw(r) {
      const key = pickCallKey(r);
      return { args: describeKey(key), exec: (g) => r.image(g, key, r.requestId('image')) };
    },
  },
];

/** A key to call with: the one touched in the last steps half the time, else mostly an active one whose account has a plan. */
function pickCallKey(r: ReplicaRun): KeyModel {
  const all = r.userKeys();
  const recent = r.fresh('key');
  if (recent && all.includes(recent) && r.rng.chance(0.5)) return recent;
  const planned = all.filter((k) => k.status === 'active' && r.account(k.accountId).plan);
  return planned.length > 0 && r.rng.chance(0.85) ? r.rng.pick(planned) : r.rng.pick(all);
}

/** A model to call: the one priced or switched last half the time, else mostly one the key may call. */
function pickCallModel(r: ReplicaRun, key: KeyModel, models: readonly string[]): string {
  const recent = r.fresh('model');
  if (recent && models.includes(recent) && r.rng.chance(0.5)) return recent;
  const plan = r.account(key.accountId).plan;
  const allowed = models.filter((id) => plan && planAllows(plan.models, id) && (!key.models || key.models.includes(id)));
  return allowed.length > 0 && r.rng.chance(0.7) ? r.rng.pick(allowed) : r.rng.pick(models);
}

/**
 * Where a member change is read back in the same step, if at all: a random gateway half the time
 * (a read there also loads that gateway's copy of the stream, so a later change elsewhere tests it).
 */
function readBack(r: ReplicaRun): Replica | null {
  return r.rng.chance(0.5) ? r.rng.pick(r.o.gateways) : null;
}

function userPlans(r: ReplicaRun) {
  return [...r.model.plans.values()].filter((p) => !r.reservedAccounts.has(p.id.replace(/^plan-/, '')));
}
