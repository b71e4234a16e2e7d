// No Docker engine runs on these machines, so the deployment files are checked for structure:
// services, health checks, volumes, the environment every process needs, and the Dockerfile.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

const compose = parse(readFileSync(new URL('../docker-compose.yml', import.meta.url), 'utf8')) as {
  services: Record<string, { image?: string; build?: string; command?: string[]; environment?: Record<string, string>; healthcheck?: { test: string[] }; volumes?: string[]; depends_on?: Record<string, { condition: string }>; ports?: string[] }>;
  volumes: Record<string, unknown>;
};

test('KurrentDB, PostgreSQL, two gateway replicas and a projector', () => {
  assert.equal(Object.keys(compose.services).sort(), ['gateway-1', 'gateway-2', 'kurrentdb', 'postgres', 'projector']);
  assert.match(compose.services.kurrentdb.image!, /kurrentdb/);
  assert.is(compose.services.kurrentdb.environment!.KURRENTDB_INSECURE, 'true');
  assert.ok(compose.services.kurrentdb.ports!.some((p) => p.startsWith('2113')));
  assert.equal(compose.services['gateway-1'].command, ['serve']);
  assert.equal(compose.services.projector.command, ['projector']);
});

test('every service has a health check or restarts, and state lives in volumes', () => {
  for (const name of ['postgres', 'kurrentdb', 'gateway-1', 'gateway-2']) assert.ok(compose.services[name].healthcheck?.test.length, `${name} health check`);
  for (const name of ['postgres', 'kurrentdb']) {
    const vols = compose.services[name].volumes ?? [];
    assert.ok(vols.some((v) => Object.keys(compose.volumes).includes(v.split(':')[0])), `${name} uses a named volume`);
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
  const code = ['src/config.ts', 'src/eventstore/db.ts', 'src/gateway/health.ts', 'src/server.ts'].map((f) => readFileSync(new URL(`../${f}`, import.meta.url), 'utf8')).join('\n');
  for (const name of Object.keys(compose.services['gateway-1'].environment!)) assert.ok(code.includes(name), `${name} is read by the code`);
});

test('the Dockerfile installs from the lockfile and runs the CLI', () => {
  const docker = readFileSync(new URL('../Dockerfile', import.meta.url), 'utf8');
  assert.match(docker, /^FROM node:20/m);
  assert.match(docker, /npm ci --omit=dev/);
  assert.match(docker, /ENTRYPOINT \["node", "bin\/tollgate.js"\]/);
  assert.match(docker, /HEALTHCHECK/);
  for (const dir of ['src', 'projections', 'schemas', 'config']) assert.match(docker, new RegExp(`COPY ${dir} `));
});

test.run();
