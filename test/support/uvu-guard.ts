// Loaded with --import by the test runner (run-tests.ts) before a test file: its imports of 'uvu'
// resolve to uvu-hooks.ts, whose hooks print their errors and fail the run. Run a file by hand the
// same way: node --import tsx --import ./test/support/uvu-guard.ts test/<file>.test.ts
import { register } from 'node:module';

register('./uvu-resolve.mjs', import.meta.url);
