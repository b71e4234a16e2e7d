// Preloaded into the gateway under test by `npm run bench -- --cpu-profile <dir>`: SIGUSR2 starts
// V8's CPU profiler and allocation sampler, the next SIGUSR2 stops them and writes
// <dir>/phase-<n>.cpuprofile and .heapprofile, so a profile covers one benchmark phase and not
// start-up. (node --cpu-prof covers the whole process life.)
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.BENCH_PROFILE_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  const post = (method: string, params: object = {}) =>
    new Promise<any>((resolve, reject) => session.post(method, params, (err, res) => (err ? reject(err) : resolve(res))));
  let running = false;
  let n = 0;
  process.on('SIGUSR2', () => {
    void (async () => {
      if (!running) {
        running = true;
        await post('Profiler.enable');
        await post('Profiler.setSamplingInterval', { interval: 250 });
        await post('Profiler.start');
        // Allocation sampling too: where the heap growth under load comes from.
        await post('HeapProfiler.enable');
        await post('HeapProfiler.startSampling', {
          samplingInterval: 16 * 1024,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        });
      } else {
        running = false;
        const { profile } = await post('Profiler.stop');
        const heap = await post('HeapProfiler.stopSampling');
        writeFileSync(join(dir, `phase-${++n}.cpuprofile`), JSON.stringify(profile));
        writeFileSync(join(dir, `phase-${n}.heapprofile`), JSON.stringify(heap.profile));
      }
    })();
  });
}
