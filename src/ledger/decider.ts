import type { DomainEvent } from './events.ts';

/**
 * Emmett-style decider: pure functions, no I/O. `Event` is what its stream holds: the events it
 * decides are the only ones it is ever asked to evolve with.
 */
export interface Decider<State, Command, Event extends DomainEvent = DomainEvent> {
  initialState(): State;
  decide(command: Command, state: State): Event[];
  evolve(state: State, event: Event): State;
  /** The state from its JSON form (snapshots); omitted when the JSON form is the state. */
  revive?(json: unknown): State;
}

export function fold<S, E extends DomainEvent>(decider: Pick<Decider<S, unknown, E>, 'initialState' | 'evolve'>, events: E[], from?: S): S {
  return events.reduce(decider.evolve, from ?? decider.initialState());
}
