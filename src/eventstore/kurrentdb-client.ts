// The few KurrentDB client calls the adapter makes, as an interface: the real
// @kurrent/kurrentdb-client satisfies it (checked below at compile time), and tests hand the
// adapter an in-memory double instead when no server is reachable.
import {
  KurrentDBClient,
  type AllStreamResolvedEvent,
  type AppendResult,
  type AppendStreamState,
  type EventData,
  type ReadAllOptions,
  type ReadStreamOptions,
  type ResolvedEvent,
  type StreamMetadata,
  type SubscribeToAllOptions,
} from '@kurrent/kurrentdb-client';

/** A live $all subscription: the adapter only listens for its events and errors, then unsubscribes. */
export interface LiveFeed {
  on(event: 'data', listener: (resolved: AllStreamResolvedEvent) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  unsubscribe(): Promise<void>;
}

export interface KurrentClient {
  appendToStream(streamName: string, events: EventData[], options: { streamState: AppendStreamState }): Promise<AppendResult>;
  readStream(streamName: string, options?: ReadStreamOptions): AsyncIterableIterator<ResolvedEvent>;
  readAll(options?: ReadAllOptions): AsyncIterableIterator<AllStreamResolvedEvent>;
  subscribeToAll(options?: SubscribeToAllOptions): LiveFeed;
  setStreamMetadata(streamName: string, metadata: StreamMetadata): Promise<unknown>;
  dispose(): Promise<void>;
}

/** Connects lazily: the first call opens the gRPC channel, so a wrong URL fails at that call. */
export function connectKurrentDb(connectionString: string): KurrentClient {
  return KurrentDBClient.connectionString(connectionString);
}

/** The connection string without its password, for error messages and logs. */
export function redactConnectionString(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@/]*@/, '//$1:***@');
}
