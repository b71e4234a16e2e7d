// Prometheus metrics (prom-client): requests and latency by route and status, billed tokens by
// model, open holds, projection lag, event store append latency.
import type { RequestTimer } from '../http/request-metrics.ts';
import client from 'prom-client';
import { phaseTotals, recordingPhases } from '../tracing/call-phases.ts';
import { currentOperatorShare, operatorWorkTotals } from '../audit/pacing.ts';
import type { ChannelRegistry } from '../upstream/channels/registry.ts';

export function createMetrics() {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  const requests = new client.Counter({
    name: 'tollgate_http_requests_total',
    help: 'HTTP requests by route and status',
    labelNames: ['route', 'method', 'status'],
    registers: [registry],
  });
  const latency = new client.Histogram({
    name: 'tollgate_http_request_duration_seconds',
    help: 'Time to the end of the response, by route and status',
    labelNames: ['route', 'method', 'status'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const billed = new client.Counter({ name: 'tollgate_billed_tokens_total', help: 'Billed tokens by model', labelNames: ['model'], registers: [registry] });
  const appendLatency = new client.Histogram({
    name: 'tollgate_eventstore_append_duration_seconds',
    help: 'Event store append (group commit) latency',
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1],
    registers: [registry],
  });
  const openHolds = new client.Gauge({ name: 'tollgate_open_holds', help: 'Quota holds not yet settled or released', registers: [registry] });
  const lagEvents = new client.Gauge({ name: 'tollgate_projection_lag_events', help: 'Events appended but not yet in the read models', registers: [registry] });
  const lagSeconds = new client.Gauge({
    name: 'tollgate_projection_lag_seconds',
    help: 'Age of the oldest event not yet in the read models',
    registers: [registry],
  });

  /** Times one request (http/request-metrics.ts); labelled by its route's pattern, never by raw paths (unbounded label values). */
  const timeRequest: RequestTimer = () => {
    const end = latency.startTimer();
    return (r) => {
      const labels = { route: r.route, method: r.method, status: String(r.status) };
      requests.inc(labels);
      end(labels);
      if (r.billed && r.model) billed.inc({ model: r.model }, r.billed);
    };
  };

  // Upstream channels: labelled by channel id (provider/upstream model), never by a key or a prompt.
  const upstreamCalls = new client.Counter({
    name: 'tollgate_upstream_calls_total',
    help: 'Upstream calls by channel and outcome (ok, failed)',
    labelNames: ['channel', 'outcome'],
    registers: [registry],
  });
  const upstreamFailovers = new client.Counter({
    name: 'tollgate_upstream_failovers_total',
    help: 'Calls moved from this channel to the next after it failed',
    labelNames: ['channel'],
    registers: [registry],
  });
  let channels: ChannelRegistry | null = null;
  new client.Gauge({
    name: 'tollgate_upstream_channel_state',
    help: 'Channel state: 1 for the state it is in (closed, half_open, open, disabled)',
    labelNames: ['channel', 'state'],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of channels?.list() ?? []) {
        for (const state of ['closed', 'half_open', 'open', 'disabled']) this.set({ channel: c.id, state }, c.state === state ? 1 : 0);
      }
    },
  });
  /** Reports the registry's channels (each channel starts at zero so it is listed before its first call). */
  const watchChannels = (registry: ChannelRegistry) => {
    channels = registry;
    for (const c of registry.list()) {
      upstreamCalls.inc({ channel: c.id, outcome: 'ok' }, 0);
      upstreamCalls.inc({ channel: c.id, outcome: 'failed' }, 0);
      upstreamFailovers.inc({ channel: c.id }, 0);
    }
    registry.observe({
      attempt: (channel, outcome) => upstreamCalls.inc({ channel, outcome }),
      failover: (channel) => upstreamFailovers.inc({ channel }),
    });
  };

  /** Counts the ledger keeps itself (commands withdrawn, charges voided), reported as they stand at each scrape. */
  const watchLedger = (counts: { withdrawn: () => number; voided: () => number; confirmations: () => { checked: number; moved: number } }) => {
    const reported = (name: string, help: string, read: () => number) =>
      new client.Counter({
        name,
        help,
        registers: [registry],
        collect() {
          this.reset();
          this.inc(read());
        },
      });
    reported(
      'tollgate_ledger_commands_withdrawn_total',
      'Commands withdrawn before they were sent because their callers had been answered (a database stall)',
      counts.withdrawn,
    );
    reported(
      'tollgate_lost_reply_voids_total',
      'Charges voided after the fact: committed in time, but the call failed because the answer was lost (the last resort)',
      counts.voided,
    );
    reported(
      'tollgate_ledger_confirmations_total',
      'Cached stream states confirmed against the log before a decision that appends nothing, or a read, was answered',
      () => counts.confirmations().checked,
    );
    reported(
      'tollgate_ledger_confirmations_moved_total',
      'Confirmations that found the stream moved by another process: decided again on the log',
      () => counts.confirmations().moved,
    );
  };

  // Operator work (dry runs, applies, verify, statements, exports) and the rests that keep it to its share.
  new client.Gauge({
    name: 'tollgate_operator_share',
    help: 'The share of wall time operator work may take (TOLLGATE_OPERATOR_SHARE)',
    registers: [registry],
    collect() {
      this.set(currentOperatorShare());
    },
  });
  new client.Counter({
    name: 'tollgate_operator_work_seconds_total',
    help: "Operator work's wall time in this process: its steps (working) and the rests between them (resting)",
    labelNames: ['part'],
    registers: [registry],
    collect() {
      this.reset();
      const t = operatorWorkTotals();
      this.inc({ part: 'working' }, t.workingMs / 1000);
      this.inc({ part: 'resting' }, t.restingMs / 1000);
    },
  });

  // Where calls' wall time went, phase by phase (TOLLGATE_CALL_PHASES=on): listed only while recorded.
  if (recordingPhases()) {
    const phaseCounter = (name: string, help: string, read: (t: { seconds: number; count: number }) => number) =>
      new client.Counter({
        name,
        help,
        labelNames: ['phase'],
        registers: [registry],
        collect() {
          this.reset();
          for (const t of phaseTotals()) this.inc({ phase: t.phase }, read(t));
        },
      });
    phaseCounter('tollgate_call_phase_seconds_total', 'Wall time of each phase of the calls (and of the ledger steps within them)', (t) => t.seconds);
    phaseCounter('tollgate_call_phase_marks_total', 'How many times each phase was recorded', (t) => t.count);
  }

  return { registry, timeRequest, appendLatency, openHolds, lagEvents, lagSeconds, watchChannels, watchLedger };
}

export type Metrics = ReturnType<typeof createMetrics>;
