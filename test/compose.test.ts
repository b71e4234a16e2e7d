// No Docker engine runs on these machines, so the deployment files are checked for structure:
// services, health checks, volumes, the environment every process needs, and the Dockerfile.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync, spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseYaml } from './support/test-tools.ts';

const compose = (await parseYaml(readFileSync(new URL('../docker-compose.yml', import.meta.url), 'utf8'))) as {
  services: Record<
    string,
    {
      image?: string;
      build?: string;
      command?: string[];
      environment?: Record<string, string>;
      healthcheck?: { test: string[] };
      volumes?: string[];
      depends_on?: Record<string, { condition: string }>;
      ports?: string[];
    }
  >;
  volumes: Record<string, unknown>;
};

test('KurrentDB, PostgreSQL, two gateway replicas and a projector', () => {
  assert.equal(Object.keys(compose.services).sort(), ['gateway-1', 'gateway-2', 'kurrentdb', 'postgres', 'projector']);
  assert.match(compose.services.kurrentdb.image!, /kurrentdb/);
  assert.is(compose.services.kurrentdb.environment!.KURRENTDB_INSECURE, 'true');
  // Only the gateways' API port is published: the databases (KurrentDB runs insecure) and the metrics port stay internal.
  for (const [name, service] of Object.entries(compose.services))
    if (!name.startsWith('gateway-')) assert.is(service.ports, undefined, `${name} publishes no port`);
  for (const name of ['gateway-1', 'gateway-2']) assert.equal(compose.services[name].ports?.length, 1, `${name} publishes the API port only`);
  assert.equal(compose.services['gateway-1'].command, ['serve']);
  assert.equal(compose.services.projector.command, ['projector']);
});

test('every service has a health check or restarts, and state lives in volumes', () => {
  for (const name of ['postgres', 'kurrentdb', 'gateway-1', 'gateway-2']) assert.ok(compose.services[name].healthcheck?.test.length, `${name} health check`);
  for (const name of ['postgres', 'kurrentdb']) {
    const vols = compose.services[name].volumes ?? [];
    assert.ok(
      vols.some((v) => Object.keys(compose.volumes).includes(v.split(':')[0])),
      `${name} uses a named volume`,
    );
  }
  assert.match(JSON.stringify(compose.services['gateway-1'].healthcheck!.test), /readyz/);
});

test('gateways run stateless on the shared PostgreSQL, with projections in the projector', () => {
  for (const name of ['gateway-1', 'gateway-2', 'projector']) {
    const env = compose.services[name].environment!;
    assert.match(env.DATABASE_URL, /^postgres:\/\/.*@postgres:5432\//);
    assert.is(env.TOLLGATE_PROJECTIONS, 'off');
    assert.ok(env.TOLLGATE_ADMIN_TOKEN, 'admin token from the environment');
    assert.equal(compose.services[name].depends_on?.postgres, { condition: 'service_healthy' });
  }
  assert.is(compose.services['gateway-1'].environment!.HOST, '0.0.0.0');
});

test('every environment variable the compose file sets is one the code reads', () => {
  const code = ['src/config.ts', 'src/eventstore/db.ts', 'src/wiring/health-routes.ts', 'src/server.ts']
    .map((f) => readFileSync(new URL(`../${f}`, import.meta.url), 'utf8'))
    .join('\n');
  for (const name of Object.keys(compose.services['gateway-1'].environment!)) assert.ok(code.includes(name), `${name} is read by the code`);
});

test('the Dockerfile installs from the lockfile, builds, and runs the compiled CLI', () => {
  const docker = readFileSync(new URL('../Dockerfile', import.meta.url), 'utf8');
  assert.match(docker, /^FROM node:20/m);
  assert.match(docker, /npm ci --omit=dev/);
  assert.match(docker, /RUN npm run build/);
  assert.match(docker, /COPY --from=build \/app\/dist \.\/dist/);
  assert.match(docker, /ENTRYPOINT \["node", "--heap-growing-percent=30", "--v8-pool-size=1", "dist\/src\/cli\/main.js"\]/);
  assert.match(docker, /HEALTHCHECK/);
  // The garbage-collector settings bench/targets.ts measures with (docs/deployment.md, "Production build").
  assert.match(docker, /ENV NODE_OPTIONS=--max-semi-space-size=8/);
  for (const dir of ['src', 'projections', 'schemas', 'config', 'web', 'setup']) assert.match(docker, new RegExp(`COPY ${dir} `));
});

test('npm run build compiles a gateway that runs without tsx and serves its API and pages', async () => {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const out = mkdtempSync(join(tmpdir(), 'tollgate-build-'));
  try {
    // The build script's own steps, into a private directory (tests run in parallel).
    execFileSync(join(root, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json', '--outDir', join(out, 'dist')], { cwd: root, stdio: 'pipe' });
    for (const dir of ['schemas', 'config', 'web', 'setup']) cpSync(join(root, dir), join(out, 'dist', dir), { recursive: true });
    symlinkSync(join(root, 'node_modules'), join(out, 'node_modules'));
    writeFileSync(join(out, 'package.json'), readFileSync(join(root, 'package.json')));
    const child = spawn(process.execPath, [join(out, 'dist', 'src', 'cli', 'main.js'), 'serve'], {
      env: { ...process.env, DATABASE_URL: '', TOLLGATE_DATA_DIR: join(out, 'data'), PORT: '0', HOST: '127.0.0.1', NODE_OPTIONS: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const base = await new Promise<string>((resolve, reject) => {
        let text = '';
        const timer = setTimeout(() => reject(new Error(`no base URL within 60 s: ${text}`)), 60_000);
        const seen = (chunk: Buffer) => {
          text += chunk.toString();
          const m = /base URL: (http:\/\/\S+)\/v1/.exec(text);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]);
          }
        };
        child.stdout.on('data', seen);
        child.stderr.on('data', seen);
        child.once('exit', (code) => reject(new Error(`exited ${code}: ${text}`)));
      });
      assert.is((await fetch(`${base}/healthz`)).status, 200);
      const models = await fetch(`${base}/v1/models`, { headers: { authorization: 'Bearer sk_svc_not_a_real_key_000000000000000' } });
      assert.is(models.status, 401);
      assert.is(((await models.json()) as { error: { type: string } }).error.type, 'invalid_request_error');
      assert.is((await fetch(`${base}/app/`)).status, 200);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test.run();
