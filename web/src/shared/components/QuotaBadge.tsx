// The header's quota badge: the remaining tokens of the saved key's subscription, read out politely
// when they change. data-remaining and data-state let tests and styles read it without parsing text.
import type { Subscription } from '../v1.ts';
import { fmt } from '../format.ts';
import type { ApiProblem } from '../problem.ts';

export function QuotaBadge({ sub, error, hasKey }: { sub: Subscription | null; error: ApiProblem | null; hasKey: boolean }) {
  if (!sub) {
    const text = !hasKey ? 'No key entered' : error?.status === 401 ? 'Key not accepted' : error ? 'Quota unavailable' : 'Loading the quota…';
    return (
      <p class="quota" id="quota" aria-live="polite" aria-atomic="true" data-state={hasKey ? 'error' : 'none'}>
        {text}
      </p>
    );
  }
  const expired = sub.status !== 'active';
  const title = sub.plan
    ? `${sub.plan.name} plan${sub.expires_at ? `, ${expired ? 'expired' : 'expires'} ${new Date(sub.expires_at).toLocaleDateString()}` : ''}`
    : 'No plan';
  return (
    <p
      class="quota"
      id="quota"
      aria-live="polite"
      aria-atomic="true"
      title={title}
      data-state={sub.remaining_tokens <= 0 ? 'empty' : expired ? 'expired' : 'ok'}
      data-remaining={String(sub.remaining_tokens)}
    >
      <span class="quota-label">Remaining</span> <strong id="remaining-tokens">{fmt(sub.remaining_tokens)}</strong> tokens
      {expired && (
        <>
          {' · '}
          <span class="warn">plan expired</span>
        </>
      )}
    </p>
  );
}
