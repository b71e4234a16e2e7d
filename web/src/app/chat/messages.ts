// The conversation as the page shows it: one entry per bubble, changed in place while a reply
// streams or an image is drawn. Pure data; Conversation.tsx renders it.
export type MessageState = 'streaming' | 'working' | 'done' | 'stopped' | 'failed';

export interface ImageResult {
  href: string;
  width: number;
  height: number;
  alt: string;
  fileName: string;
}

export interface Message {
  id: number;
  role: 'user' | 'assistant';
  state?: MessageState;
  /** The words of the bubble (a user's message, a reply so far); a muted note instead when `muted`. */
  text?: string;
  muted?: boolean;
  /** A waiting indicator and what it says, until the first words or the image arrive. */
  pending?: string;
  /** User image turns: the chosen source file (data URI) or URL. */
  sourceThumb?: string;
  sourceUrl?: string;
  image?: ImageResult;
  meta?: string;
  metaWarn?: boolean;
  failed?: boolean;
}

let next = 0;
export const newMessage = (m: Omit<Message, 'id'>): Message => ({ id: ++next, ...m });

/** Decodes a base64 JPEG answer into a Blob for an object URL. */
export function jpegBlob(b64: string): Blob {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new Blob([bytes], { type: 'image/jpeg' });
}
