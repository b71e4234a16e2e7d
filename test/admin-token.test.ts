// The admin token file: created on first start (even when the data directory does not exist yet,
// as on PostgreSQL where nothing else lives there), readable only by its owner, kept after.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN_TOKEN_PREFIX, loadOrCreateAdminToken } from '../src/http/admin-token.ts';

test('a missing data directory is created with the token in it; the next start reads the same token', () => {
  const root = mkdtempSync(join(tmpdir(), 'tollgate-admin-token-'));
  try {
    const dir = join(root, 'not', 'yet', 'there');
    const first = loadOrCreateAdminToken(dir);
    assert.ok(first.created);
    assert.ok(first.token.startsWith(ADMIN_TOKEN_PREFIX));
    assert.is(statSync(first.path).mode & 0o777, 0o600);
    const second = loadOrCreateAdminToken(dir);
    assert.not.ok(second.created);
    assert.is(second.token, first.token);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test.run();
