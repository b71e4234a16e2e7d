// The part after # names the section (#/accounts, #/accounts/<id>, #/plans, …), so each can be
// bookmarked; an unknown one opens the accounts.
export const SECTIONS = [
  { id: 'accounts', label: 'Accounts' },
  { id: 'plans', label: 'Plans' },
  { id: 'models', label: 'Models' },
  { id: 'channels', label: 'Channels' },
  { id: 'payments', label: 'Payments' },
  { id: 'finance', label: 'Finance' },
  { id: 'corrections', label: 'Corrections' },
  { id: 'verify', label: 'Verify' },
] as const;

export type SectionId = (typeof SECTIONS)[number]['id'];

export interface Route {
  section: SectionId;
  /** The account opened under #/accounts/<id>. */
  account: string | null;
}

export function parseHash(hash: string): Route {
  const [first, ...rest] = hash.replace(/^#\/?/, '').split('/').filter(Boolean);
  const section = SECTIONS.find((s) => s.id === first)?.id ?? 'accounts';
  let account: string | null = null;
  if (first === 'accounts' && rest.length) {
    try {
      account = decodeURIComponent(rest.join('/'));
    } catch {
      account = rest.join('/');
    }
  }
  return { section, account };
}
