// A models config for stress runs: the default routes with the simulated upstream slowed down,
// so calls are in flight long enough for a crash to land inside them.
import { readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { writeModelsConfig } from '../../support/http.ts';

export function writeSlowSimulatedConfig(delays: { tokenDelayMs: number; imageDelayMs: number }): { path: string; remove(): void } {
  const config = JSON.parse(readFileSync(new URL('../../../config/models.json', import.meta.url), 'utf8'));
  delete config.$schema;
  for (const p of Object.values(config.providers) as Array<Record<string, unknown>>) {
    if (p.type === 'simulated') Object.assign(p, delays);
  }
  const path = writeModelsConfig(config);
  return { path, remove: () => rmSync(dirname(path), { recursive: true, force: true }) };
}
