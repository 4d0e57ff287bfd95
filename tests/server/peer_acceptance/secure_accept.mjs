// Acceptance of `neupims serve`'s security (docs/api.md "Security: TLS and a bearer token") with
// real peers: the official openai SDK over HTTPS (the test CA through NODE_EXTRA_CA_CERTS) and
// @grpc/grpc-js with ssl channel credentials (LlmService and Health from the repo's protos).
// Usage:
//   node secure_accept.mjs token HTTPS_BASE_URL GRPC_HOST:PORT PKI_DIR TOKEN PROTO_DIR
//     (a server with --tls-cert/--tls-key and --auth-token-file)
//   node secure_accept.mjs mtls HTTPS_BASE_URL GRPC_HOST:PORT PKI_DIR - PROTO_DIR
//     (a server with --tls-client-ca as well, no token)
// PKI_DIR holds ca.pem, client.pem/.key and rogue_client.pem/.key (tests/server/test_pki.h).
// Prints one PASS/FAIL line per check; exits 1 on a FAIL.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import OpenAI from 'openai';
import {createRequire} from 'node:module';
const require = createRequire(import.meta.url);

const [mode, baseURL, target, pki, token, protoDir] = process.argv.slice(2);
const read = (name) => fs.readFileSync(`${pki}/${name}`);
const results = [];
async function check(name, fn) {
  try { await fn(); results.push(['PASS', name]); }
  catch (e) { results.push(['FAIL', name, String(e && e.stack || e).slice(0, 500)]); }
}
const opts = {keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true};
const Llm = grpc.loadPackageDefinition(protoLoader.loadSync('neupims/v1/llm_service.proto',
  {...opts, includeDirs: [protoDir]})).neupims.v1.LlmService;
const healthProto = require.resolve('grpc-health-check/package.json').replace('package.json', 'proto/health/v1/health.proto');
const Health = grpc.loadPackageDefinition(protoLoader.loadSync(healthProto, opts)).grpc.health.v1.Health;
const bearer = (t) => { const md = new grpc.Metadata(); if (t !== null) md.set('authorization', `Bearer ${t}`); return md; };
const call = (client, m, req, md = new grpc.Metadata()) =>
  new Promise((res, rej) => client[m](req, md, {deadline: Date.now() + 20_000}, (e, r) => e ? rej(e) : res(r)));
const code = (c, text) => (e) => { assert.equal(e.code, c, `${e.code} ${e.details}`);
  if (text) assert.match(e.details, text); return true; };
// One HTTPS GET with node's own client (client certificate optional); resolves {status, body}.
function httpsGet(path, {cert, key, headers = {}} = {}) {
  return new Promise((res, rej) => {
    const url = path.startsWith('https:') ? path : baseURL + path;
    const req = https.get(url, {ca: read('ca.pem'), cert, key, headers}, (r) => {
      let body = ''; r.on('data', (d) => body += d); r.on('end', () => res({status: r.statusCode, body, headers: r.headers}));
    });
    req.on('error', rej);
  });
}

if (mode === 'token') {
  const sdk = (apiKey) => new OpenAI({baseURL, apiKey, maxRetries: 0, timeout: 20_000});
  const ssl = grpc.credentials.createSsl(read('ca.pem'));
  const llm = new Llm(target, ssl);
  const health = new Health(target, ssl);
  let model = null;
  await check('openai SDK over https with the token as apiKey: models, chat, streamed completion', async () => {
    const client = sdk(token);
    const models = []; for await (const m of client.models.list()) models.push(m);
    model = models[0].id;
    const r = await client.chat.completions.create({model, messages: [{role: 'user', content: 'Hi'}],
      max_completion_tokens: 5, ignore_eos: true});
    assert.equal(r.usage.completion_tokens, 5);
    const s = await client.completions.create({model, prompt: 'abc', max_tokens: 4, ignore_eos: true,
      stream: true, stream_options: {include_usage: true}});
    let usage = null; for await (const c of s) if (c.usage) usage = c.usage;
    assert.equal(usage.completion_tokens, 4);
  });
  const authError = (e) => {
    assert.ok(e instanceof OpenAI.AuthenticationError, `AuthenticationError: got ${e.constructor.name} ${e.message}`);
    assert.equal(e.status, 401);
    assert.equal(e.error.type, 'authentication_error');
    assert.ok('param' in e.error && 'code' in e.error && typeof e.error.message === 'string', JSON.stringify(e.error));
    return true;
  };
  await check('openai SDK with a wrong token: 401 AuthenticationError in OpenAI shape', async () => {
    await assert.rejects(sdk(token + 'x').chat.completions.create({model: model ?? 'x',
      messages: [{role: 'user', content: 'Hi'}], max_completion_tokens: 2}), authError);
    await assert.rejects(sdk('wrong').models.list(), authError);
  });
  // The SDK insists on an apiKey; a null default header drops the Authorization it would send.
  await check('openai SDK without an Authorization header: 401, streamed too', async () => {
    const noAuth = new OpenAI({baseURL, apiKey: 'unused', maxRetries: 0, timeout: 20_000,
      defaultHeaders: {Authorization: null}});
    await assert.rejects(noAuth.models.list(), (e) => authError(e) && /missing bearer token/.test(e.error.message));
    await assert.rejects(noAuth.completions.create({model: model ?? 'x', prompt: 'x', max_tokens: 2,
      stream: true}), authError);
  });
  await check('raw https: no header 401 with WWW-Authenticate Bearer; /health needs no token', async () => {
    const r = await httpsGet('/models');
    assert.equal(r.status, 401);
    assert.match(r.headers['www-authenticate'] ?? '', /^Bearer/);
    assert.equal(JSON.parse(r.body).error.type, 'authentication_error');
    const h = await httpsGet(new URL(baseURL).origin + '/health');
    assert.equal(h.status, 200, h.body);
  });
  await check('grpc-js ssl + Bearer metadata: Complete and a streamed Generate', async () => {
    const r = await call(llm, 'Complete', {text: 'hello', max_new_tokens: 6, ignore_eos: true}, bearer(token));
    assert.equal(r.tokens.length, 6);
    const s = llm.Generate({text: 'hi', max_new_tokens: 5, ignore_eos: true}, bearer(token));
    let n = 0, complete = null;
    for await (const m of s) { if (m.tokens) n += m.tokens.tokens.length; if (m.complete) complete = m.complete; }
    assert.equal(n, 5);
    assert.equal(complete.finish_reason, 'FINISH_REASON_LENGTH');
  });
  await check('grpc-js without the token: UNAUTHENTICATED (missing), wrong token UNAUTHENTICATED (invalid)', async () => {
    await assert.rejects(call(llm, 'GetModelInfo', {}), code(grpc.status.UNAUTHENTICATED, /missing bearer token/));
    await assert.rejects(call(llm, 'Complete', {text: 'x', max_new_tokens: 2}, bearer('nope')),
      code(grpc.status.UNAUTHENTICATED, /invalid bearer token/));
    const s = llm.Generate({text: 'x', max_new_tokens: 2}, bearer(null));
    await assert.rejects((async () => { for await (const m of s) void m; })(), code(grpc.status.UNAUTHENTICATED));
  });
  await check('grpc-js: the token with call credentials (createFromMetadataGenerator) works', async () => {
    const creds = grpc.credentials.combineChannelCredentials(ssl,
      grpc.credentials.createFromMetadataGenerator((_, cb) => cb(null, bearer(token))));
    const c = new Llm(target, creds);
    const m = await call(c, 'GetModelInfo', {});
    assert.ok(m.max_seq_len > 0);
    c.close();
  });
  await check('grpc-js: health Check works without the token', async () => {
    const r = await call(health, 'Check', {service: ''});
    assert.equal(r.status, 'SERVING');
    const r2 = await call(health, 'Check', {service: 'neupims.v1.LlmService'});
    assert.equal(r2.status, 'SERVING');
  });
  await check('grpc-js reflection (v1alpha): UNAUTHENTICATED without the token, served with it', async () => {
    const reflDir = require.resolve('@grpc/reflection/package.json').replace('package.json', 'build/proto');
    const R = grpc.loadPackageDefinition(protoLoader.loadSync('grpc/reflection/v1alpha/reflection.proto',
      {...opts, includeDirs: [reflDir]})).grpc.reflection.v1alpha.ServerReflection;
    const c = new R(target, ssl);
    const list = (md) => new Promise((res, rej) => {
      const out = []; const s = c.ServerReflectionInfo(md);
      s.on('data', (d) => out.push(d)); s.on('error', rej); s.on('end', () => res(out));
      s.write({list_services: ''}); s.end();
    });
    await assert.rejects(list(new grpc.Metadata()), code(grpc.status.UNAUTHENTICATED, /missing bearer token/));
    const [r] = await list(bearer(token));
    assert.ok(r.list_services_response.service.some((x) => x.name === 'neupims.v1.LlmService'));
    c.close();
  });
  await check('grpc-js plaintext against the TLS port: UNAVAILABLE', async () => {
    const c = new Llm(target, grpc.credentials.createInsecure());
    await assert.rejects(call(c, 'GetModelInfo', {}, bearer(token)), code(grpc.status.UNAVAILABLE));
    c.close();
  });
  llm.close(); health.close();
} else if (mode === 'mtls') {
  const withCert = grpc.credentials.createSsl(read('ca.pem'), read('client.key'), read('client.pem'));
  await check('mTLS grpc-js with the client certificate: GetModelInfo and health', async () => {
    const c = new Llm(target, withCert);
    assert.ok((await call(c, 'GetModelInfo', {})).max_seq_len > 0);
    c.close();
    const h = new Health(target, withCert);
    assert.equal((await call(h, 'Check', {service: ''})).status, 'SERVING');
    h.close();
  });
  await check('mTLS grpc-js without a client certificate: refused (UNAVAILABLE), health too', async () => {
    const c = new Llm(target, grpc.credentials.createSsl(read('ca.pem')));
    await assert.rejects(call(c, 'GetModelInfo', {}), code(grpc.status.UNAVAILABLE));
    c.close();
    const h = new Health(target, grpc.credentials.createSsl(read('ca.pem')));
    await assert.rejects(call(h, 'Check', {service: ''}), code(grpc.status.UNAVAILABLE));
    h.close();
  });
  await check('mTLS grpc-js with a certificate of another CA: refused (UNAVAILABLE)', async () => {
    const c = new Llm(target, grpc.credentials.createSsl(read('ca.pem'), read('rogue_client.key'), read('rogue_client.pem')));
    await assert.rejects(call(c, 'GetModelInfo', {}), code(grpc.status.UNAVAILABLE));
    c.close();
  });
  await check('mTLS https with the client certificate: 200 /v1/models', async () => {
    const r = await httpsGet('/models', {cert: read('client.pem'), key: read('client.key')});
    assert.equal(r.status, 200, r.body);
    assert.ok(JSON.parse(r.body).data.length >= 1);
  });
  await check('mTLS https without a client certificate: the handshake fails', async () => {
    await assert.rejects(httpsGet('/models'), (e) => { assert.ok(e.code || e.message, String(e)); return true; });
  });
  await check('mTLS openai SDK (no client certificate): APIConnectionError', async () => {
    const c = new OpenAI({baseURL, apiKey: 'x', maxRetries: 0, timeout: 10_000});
    await assert.rejects(c.models.list(), (e) => e instanceof OpenAI.APIConnectionError || (() => { throw e; })());
  });
} else {
  console.error('mode must be token or mtls'); process.exit(2);
}

for (const r of results) console.log(r.join(' | '));
const failed = results.filter((r) => r[0] === 'FAIL').length;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
