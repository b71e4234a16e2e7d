// The operator's view of an account's members (mounted in the admin router, behind its token):
//   GET    /accounts/:id/members             members and every change to them, with its actor
//   POST   /accounts/:id/members {email, role}  invite (the operator may invite an owner)
//   PATCH  /accounts/:id/members/:member {role}, DELETE /accounts/:id/members/:member
import type { Context } from 'koa';
import Router from '@koa/router';
import type { Ledger } from '../ledger/ledger.ts';
import { badRequest } from '../http/errors.ts';
import { requireId } from '../ledger/ledger.ts';
import { isRole } from '../ledger/roles.ts';
import { changeRole, invite, membersWithHistory, remove } from './members.ts';
import { requireEmail } from './sign-in.ts';

const field = (ctx: Context, name: string): unknown => (ctx.request.body as Record<string, unknown> | undefined)?.[name];
function role(v: unknown) {
  if (!isRole(v)) throw badRequest("'role' must be owner, admin, billing or developer.", 'role');
  return v;
}

export function adminMembersRoutes(ledger: Ledger): Router {
  const r = new Router({ prefix: '/accounts/:id/members' });
  const operator = (ctx: Context) => ({ actorRole: null, actor: ctx.state.actor });
  r.get('/', async (ctx) => {
    ctx.body = { object: 'members', account_id: ctx.params.id, ...(await membersWithHistory(ledger, requireId(ctx.params.id, 'account_id'))) };
  });
  r.post('/', async (ctx) => {
    const m = await invite(ledger, requireId(ctx.params.id, 'account_id'), requireEmail(field(ctx, 'email')), role(field(ctx, 'role')), operator(ctx));
    ctx.status = 201;
    ctx.body = { object: 'member', ...m };
  });
  r.patch('/:member', async (ctx) => {
    const m = await changeRole(
      ledger,
      requireId(ctx.params.id, 'account_id'),
      requireId(ctx.params.member, 'member_id'),
      role(field(ctx, 'role')),
      operator(ctx),
    );
    ctx.body = { object: 'member', member_id: m.memberId, email: m.email, role: m.role, status: m.status };
  });
  r.delete('/:member', async (ctx) => {
    await remove(ledger, requireId(ctx.params.id, 'account_id'), requireId(ctx.params.member, 'member_id'), operator(ctx));
    ctx.body = { object: 'member', member_id: ctx.params.member, removed: true };
  });
  return r;
}
