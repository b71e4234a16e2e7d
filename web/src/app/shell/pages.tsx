// The pages of the /app shell, in navigation order: one line a page. `needs` is the action the
// page needs (null: every member); a page with `href` is a separate page the shell links to (the
// key-only pages). A new page also needs its path in src/pages/web-routes.ts PAGES (served app.html).
import type { FunctionComponent } from 'preact';
import type { Action } from '../api/types.ts';
import { AccountUsagePage } from '../account-usage/AccountUsagePage.tsx';
import { BillingPage } from '../billing/BillingPage.tsx';
import { KeysPage } from '../keys/KeysPage.tsx';
import { MembersPage } from '../members/MembersPage.tsx';
import { SessionsPage } from '../sessions/SessionsPage.tsx';

export interface ShellPage {
  path: string;
  label: string;
  needs: Action | null;
  Page?: FunctionComponent;
  href?: string;
}

export const SHELL_PAGES: ShellPage[] = [
  { path: 'keys', label: 'Keys', needs: 'keys.read', Page: KeysPage },
  { path: 'members', label: 'Members', needs: 'members.read', Page: MembersPage },
  { path: 'account-usage', label: 'Usage', needs: 'usage.read', Page: AccountUsagePage },
  { path: 'billing', label: 'Billing', needs: 'billing', Page: BillingPage },
  { path: 'chat', label: 'Chat', needs: null, href: 'chat' },
  { path: 'sessions', label: 'Sessions', needs: null, Page: SessionsPage },
];
