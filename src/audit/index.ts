// The audit feature as the other features see it: what they may import, and nothing else.

export { buildStatement, statementCsv } from './statements.ts';
