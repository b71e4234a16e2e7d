// What a key can do through a gateway, asked with the official OpenAI client: list the models.
import OpenAI from 'openai';

/** 200 when the key lists the models through the gateway at `base`, else the error's status. */
export async function modelsStatus(base: string, key: string): Promise<number> {
  try {
    await new OpenAI({ apiKey: key, baseURL: `${base}/v1`, maxRetries: 0 }).models.list();
    return 200;
  } catch (err) {
    return (err as { status?: number }).status ?? 0;
  }
}

/**
 * The key's answer at a gateway other than the one that revoked or rotated it, once it has heard:
 * another process learns of it from the event feed (src/keys/key-directory.ts: within one poll,
 * 250 ms), so this asks again until it is refused, at most 50 times 100 ms apart.
 */
export async function refusedOnOther(base: string, key: string): Promise<number> {
  let status = 0;
  for (let i = 0; i < 50; i++) {
    status = await modelsStatus(base, key);
    if (status !== 200) return status;
    await new Promise((r) => setTimeout(r, 100));
  }
  return status;
}
