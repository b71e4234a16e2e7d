// A module resolution hook (node:module register, from uvu-guard.ts): 'uvu' imported from anywhere
// but uvu-hooks.ts itself is uvu-hooks.ts, which imports the real uvu.
const WRAPPER = new URL('./uvu-hooks.ts', import.meta.url).href;

export async function resolve(specifier, context, next) {
  // Resolved on down the chain, so tsx loads the TypeScript.
  if (specifier === 'uvu' && context.parentURL !== WRAPPER) return next(WRAPPER, context);
  return next(specifier, context);
}
