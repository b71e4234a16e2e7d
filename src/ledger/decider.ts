import type { DomainEvent } from './events.ts';

/** Emmett-style decider: pure functions, no I/O. */
export interface Decider<State, Command> {
  initialState(): State;
  decide(command: Command, state: State): DomainEvent[];
  evolve(state: State, event: DomainEvent): State;
  /** The state from its JSON form (snapshots); omitted when the JSON form is the state. */
  revive?(json: unknown): State;
}

export function fold<S>(decider: Pick<Decider<S, unknown>, 'initialState' | 'evolve'>, events: DomainEvent[], from?: S): S {
  return events.reduce(decider.evolve, from ?? decider.initialState());
}
