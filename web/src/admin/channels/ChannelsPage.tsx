// Channel health: each upstream channel's state and this process's counters, and the switch that
// disables one (a reason required) or enables it again, after a confirmation.
import { useRef, useState } from 'preact/hooks';
import { confirmAction } from '../../shared/components/ConfirmDialog.tsx';
import { admin, pathOf } from '../api/client.ts';
import type { Channel, List } from '../api/types.ts';
import { announce } from '../../shared/components/announce.tsx';
import { Heading, Loading, Pill, Result } from '../../shared/components/Page.tsx';
import { DataTable, Num } from '../../shared/components/DataTable.tsx';
import { when } from '../../shared/format.ts';
import { useLoaded } from '../../shared/useLoaded.ts';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';

const STATE_TEXT: Record<string, string> = { closed: 'Healthy', open: 'Open (failing)', half_open: 'Trial', disabled: 'Disabled' };

function note(c: Channel): string {
  if (c.disabled) return `By ${c.disabled.by}${c.disabled.reason ? `: “${c.disabled.reason}”` : ''}, ${when(c.disabled.at)}`;
  return c.retry_at ? `Trial call after ${when(c.retry_at)}` : '';
}

export function ChannelsPage() {
  const loaded = useLoaded(async () => (await admin<List<Channel>>('channels')).data);
  const { data: channels, busy, failed, problem, setProblem, load } = loaded;
  const [done, setDone] = useState('');
  const list = useRef<HTMLDivElement>(null);

  const toggle = async (c: Channel) => {
    const enable = c.state === 'disabled';
    const answer = await confirmAction({
      title: `${enable ? 'Enable' : 'Disable'} channel ${c.id}?`,
      body: enable
        ? [`Calls to ${c.models.join(', ')} may use ${c.id} again.`]
        : [`Calls to ${c.models.join(', ')} stop using ${c.id} and fail over to their other channels; a model with no other channel cannot be served.`],
      confirmLabel: enable ? 'Enable channel' : 'Disable channel',
      danger: !enable,
      reason: { label: 'Reason', required: !enable },
    });
    if (!answer.confirmed) {
      announce('The channel was not changed.');
      return;
    }
    try {
      setProblem(null);
      const res = await admin<{ changed: boolean }>(`channels/${pathOf(c.id)}`, { method: 'PATCH', body: { enabled: enable, reason: answer.reason } });
      await load();
      setDone(`Channel ${c.id} ${enable ? 'enabled' : 'disabled'}${res.changed ? '' : ' (it already was)'}.`);
      setTimeout(() => list.current?.querySelector<HTMLElement>(`tr[data-channel-id="${CSS.escape(c.id)}"] button`)?.focus(), 0);
    } catch (err) {
      setProblem(err);
    }
  };

  return (
    <>
      <Heading
        text="Channel health"
        intro="Each channel is one provider and upstream model. Counters are this gateway process’s, since it started; switches are events and reach every process."
      />
      <ProblemRegion problem={problem} onDismiss={() => setProblem(null)} />
      <Result>{done}</Result>
      <section class="card" aria-labelledby="channels-list-heading">
        <div class="card-head">
          <h2 id="channels-list-heading">Channels</h2>
          <button type="button" class="secondary small" onClick={() => load()}>
            Refresh
          </button>
        </div>
        <div ref={list} aria-busy={busy ? 'true' : 'false'}>
          {channels ? (
            <DataTable
              caption="Upstream channels"
              tableId="channels-table"
              columns={['Channel', 'Models', 'State', '#Calls', '#Failures', '#Failovers', 'Note', 'Action']}
              empty="No channels in the models config."
              rows={channels.map((c) => {
                const disabled = c.state === 'disabled';
                return (
                  <tr key={c.id} data-channel-id={c.id} data-state={c.state}>
                    <th scope="row">
                      {c.id}
                      <span class="sub">{`${c.provider} · ${c.upstream_model}`}</span>
                    </th>
                    <td class="models">{c.models.join(', ')}</td>
                    <td>
                      <Pill state={c.state} text={STATE_TEXT[c.state] ?? c.state} />
                    </td>
                    <Num value={c.calls} data-field="calls" />
                    <Num value={c.failures} data-field="failures" />
                    <Num value={c.failovers} data-field="failovers" />
                    <td class="note">{note(c)}</td>
                    <td>
                      <button
                        type="button"
                        class={disabled ? 'small' : 'small secondary danger-text'}
                        aria-label={`${disabled ? 'Enable' : 'Disable'} channel ${c.id}`}
                        onClick={() => toggle(c)}
                      >
                        {disabled ? 'Enable' : 'Disable'}
                      </button>
                    </td>
                  </tr>
                );
              })}
            />
          ) : (
            <Loading text={failed ? 'The channels could not be loaded.' : 'Loading the channels…'} />
          )}
        </div>
      </section>
    </>
  );
}
