// The commands of the catalogue, sent through the base ledger with their deciders: a model's
// price and status, a channel in or out of rotation, and the spec's models priced once.
import type { EventMetadata } from '../eventstore/port.ts';
import { streams } from '../ledger/events.ts';
import { metadataFor, type Ledger } from '../ledger/ledger.ts';
import { modelDecider, type ModelCommand } from './model-decider.ts';
import { channelDecider } from './channel-decider.ts';
import { SEED_MODELS } from './seed-models.ts';
import { toMilli } from '../money/pricing.ts';

/** A model command (price, correction) through the model decider. */
export const modelCommand = (ledger: Ledger, modelId: string, command: ModelCommand, md: EventMetadata) =>
  ledger.command(modelDecider, streams.model(modelId), command, md);

export const priceModel = (ledger: Ledger, cmd: Omit<Extract<ModelCommand, { type: 'Price' }>, 'type'>, actor: string) =>
  modelCommand(ledger, cmd.modelId, { type: 'Price', ...cmd }, metadataFor(actor));

/** Takes an upstream channel out of rotation, or puts it back (no event if it already is). */
export const setChannelEnabled = (ledger: Ledger, channelId: string, enabled: boolean, reason: string, actor: string) =>
  ledger.command(channelDecider, streams.channel(channelId), { type: enabled ? 'Enable' : 'Disable', channelId, reason }, metadataFor(actor));

/** Prices the spec's models once, on a ledger that has none. */
export async function seedModels(ledger: Ledger, actor = 'system:seed'): Promise<void> {
  for (const m of SEED_MODELS) {
    const state = await ledger.streamState(modelDecider, streams.model(m.id));
    if (state.exists) continue;
    await priceModel(ledger, { modelId: m.id, multiplierMilli: toMilli(m.multiplier), status: 'ACTIVE', alias: m.alias }, actor);
  }
}
