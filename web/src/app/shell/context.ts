// What every page inside the /app shell is given: the signed-in person, the account they are
// looking at, their role in it and what the role lets them do (the one table, src/ledger/roles.ts).
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { can } from '../../../../src/ledger/roles.ts';
import type { Action, Membership, Role, Session } from '../api/types.ts';

export interface ShellContext {
  session: Session;
  account: Membership;
  role: Role;
  /** Whether the role may do this; the server refuses it anyway (403). */
  may(action: Action): boolean;
  /** Reads the session again (after a change to one's own membership). */
  reload(): void;
}

export const ShellCtx = createContext<ShellContext | null>(null);

export function shellContext(session: Session, account: Membership, reload: () => void): ShellContext {
  return { session, account, role: account.role, may: (action) => can(account.role, action), reload };
}

export function useShell(): ShellContext {
  const ctx = useContext(ShellCtx);
  if (!ctx) throw new Error('useShell outside the /app shell');
  return ctx;
}
