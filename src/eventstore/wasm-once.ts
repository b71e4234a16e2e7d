// Each WebAssembly module is compiled once per process and kept (issue 44). Node 24's V8 aborted
// PGlite test processes with `Check failed: jit_page.has_value()` (nodejs/node#64500,
// electric-sql/pglite#1053): V8 keeps one registry of executable pages for the whole process,
// and it loses track of one while wasm code is created and freed on the main thread and V8's
// compiler threads at once. Every in-memory PGlite opened compiled 15 wasm modules of its own,
// dropped again at close: two PostgreSQL libraries (582 KB and 156 KB: dict_snowball.so and
// plpgsql.so) and 13 small function thunks; the tests open hundreds. PGlite already keeps its
// 9 MB engine compiled. With this, the same bytes give back the module compiled the first time:
// nothing is compiled twice, and no module's code is freed while the process runs. A module holds
// no state (each open still instantiates its own), so sharing one changes nothing else.
// Wasm code GC is off for the same reason: Node 24's V8 also aborted with
// `jit_page_->allocations_.erase(addr) == 1` when its code GC freed a wasm-to-JS import wrapper
// already marked dying (nodejs/node#64500; fixed in V8, not yet in a Node 24 release). With every
// module kept, the only code it could free is replaced tiers and wrappers: a bounded amount.
import { createHash } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';

let installed = false;

/** Makes `new WebAssembly.Module(bytes)` return the module compiled from the same bytes before. */
export function compileWasmOnce(): void {
  if (installed) return;
  installed = true;
  setFlagsFromString('--no-wasm-code-gc');
  const compiled = new Map<string, WebAssembly.Module>();
  const Compile = WebAssembly.Module;
  const once = new Proxy(Compile, {
    construct(target, args: unknown[], newTarget) {
      const bytes = args[0];
      // Compile options (string builtins and the like) would have to be part of the key: none here.
      if (args.length !== 1 || !(ArrayBuffer.isView(bytes) || bytes instanceof ArrayBuffer)) return Reflect.construct(target, args, newTarget) as object;
      const view = ArrayBuffer.isView(bytes) ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : new Uint8Array(bytes);
      const key = createHash('sha256').update(view).digest('base64');
      let module = compiled.get(key);
      if (!module) {
        module = Reflect.construct(target, args, newTarget) as WebAssembly.Module;
        compiled.set(key, module);
      }
      return module;
    },
  });
  Object.defineProperty(WebAssembly, 'Module', { value: once, writable: true, configurable: true, enumerable: false });
}
