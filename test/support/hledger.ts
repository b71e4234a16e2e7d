// The real hledger reading a journal the gateway wrote: each account's balance in minor units, or
// null (with a note) where hledger is not installed (.ci/run installs it with apt).
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

export async function hledgerBalances(journal: string, who: string): Promise<Record<string, number> | null> {
  try {
    execFileSync('hledger', ['--version']);
  } catch {
    console.log(`${who}: hledger is not installed (apt-get install hledger; .ci/run does); the journal is checked without it`);
    return null;
  }
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-journal-'));
  writeFileSync(join(dir, 'books.journal'), journal);
  const { stdout } = await promisify(execFile)('hledger', ['-f', join(dir, 'books.journal'), 'balance', '--flat', '--no-total', '-O', 'csv']);
  const rows = stdout
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => l.replace(/"/g, '').split(','));
  return Object.fromEntries(rows.map(([account, amount]) => [account, Math.round(Number(amount.replace(/[^0-9.-]/g, '')) * 100)]));
}
