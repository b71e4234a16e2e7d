// Google credentials for Vertex AI through google-auth-library: the JSON the operator put in an
// environment variable (a service account key, a workload identity federation config, gcloud's
// authorized user), or without one Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
// gcloud, the metadata server of a Google Cloud machine). Tokens are fetched and refreshed by the
// library; the gateway only asks for the headers of each request.
import { GoogleAuth, type GoogleAuthOptions } from 'google-auth-library';
import { UpstreamError } from '../port.ts';

/** Vertex AI's scope (both Google's and Anthropic's models there). */
export const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

/**
 * google-auth-library's options for these credentials: the client is made from the JSON at once
 * (so credentials it cannot use stop the start), and handed over as a client rather than as
 * `credentials`, which @google/genai would announce on the console at every start.
 */
export function googleAuthOptions(credentials: Record<string, unknown> | undefined, project: string): GoogleAuthOptions {
  const options: GoogleAuthOptions = { scopes: [CLOUD_PLATFORM_SCOPE], projectId: project };
  if (!credentials) return options;
  return { ...options, authClient: new GoogleAuth(options).fromJSON(credentials as Parameters<GoogleAuth['fromJSON']>[0]) };
}

/** The headers that authorize one request (a bearer token, and the quota project when the credentials name one). */
export async function authorizationHeaders(auth: GoogleAuth, op: string): Promise<Record<string, string>> {
  let headers: Headers;
  try {
    headers = await auth.getRequestHeaders();
  } catch (error) {
    // The library's messages may quote the credentials' fields: only their kind is told.
    const code = (error as { code?: unknown; status?: unknown } | null)?.status ?? (error as { code?: unknown } | null)?.code;
    throw new UpstreamError(
      `upstream ${op} could not be authorized with the Google credentials${/^[\w-]{1,32}$/.test(String(code)) ? ` (${String(code)})` : ''}`,
      undefined,
      'config',
    );
  }
  return Object.fromEntries(headers.entries());
}

/** Reads the credentials JSON from its variable's value; a value that is not a JSON object stops the start. */
export function parseCredentials(value: string, variable: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new Error(
      `models config: the environment variable ${variable} must hold Google credentials as JSON (a service account key file's contents), but it is not JSON`,
    );
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || typeof (parsed as { type?: unknown }).type !== 'string')
    throw new Error(`models config: the environment variable ${variable} must hold a Google credentials JSON object with a "type"`);
  return parsed as Record<string, unknown>;
}
