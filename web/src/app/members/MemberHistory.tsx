// Every change to the account's members with its actor and time, newest first.
import { DataTable } from '../../shared/components/DataTable.tsx';
import { dateOf } from '../../shared/format.ts';
import type { MemberEvent } from '../api/types.ts';

const WHAT: Record<string, (e: MemberEvent) => string> = {
  MemberInvited: (e) => `${e.email} invited as ${e.role}`,
  MemberJoined: (e) => (e.invited ? `${e.email} joined as ${e.role}` : `${e.email} founded the account as ${e.role}`),
  MemberRoleChanged: (e) => `${e.email}: ${e.from} → ${e.to}`,
  MemberRemoved: (e) => `${e.email} removed (was ${e.role})`,
};

/** "member:mem_…:ann@x.test" as "ann@x.test"; the operator's "admin:ops" as "the operator (ops)". */
export function actorName(actor: string): string {
  const m = /^member:[^:]+:(.+)$/.exec(actor);
  if (m) return m[1];
  if (actor === 'admin:operator') return 'the operator';
  if (actor.startsWith('admin:')) return `the operator (${actor.slice('admin:'.length)})`;
  return actor.replace(/^person:/, '');
}

export function MemberHistory({ events }: { events: MemberEvent[] | null }) {
  return (
    <DataTable
      id="member-history"
      labelledBy="history-heading"
      caption="Changes to the members, newest first"
      columns={[{ label: 'When' }, { label: 'What' }, { label: 'By' }]}
      empty={events ? 'No changes yet.' : 'Loading…'}
      rows={[...(events ?? [])].reverse().map((e, i) => (
        <tr key={`${e.at}-${i}`}>
          <td>
            {dateOf(e.at)} {new Date(e.at).toLocaleTimeString('en-US', { hour: '2-digit', minute: '2-digit' })}
          </td>
          <td>{(WHAT[e.type] ?? ((x: MemberEvent) => x.type))(e)}</td>
          <td>{actorName(e.actor)}</td>
        </tr>
      ))}
    />
  );
}
