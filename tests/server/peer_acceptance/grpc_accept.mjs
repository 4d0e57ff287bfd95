// Acceptance of `neupims serve`'s gRPC API (docs/api.md) with @grpc/grpc-js: the LlmService
// client is built from the server's own reflection answers (no local copy of neupims.v1), then
// health (Check, Watch), streaming Generate, Complete, client cancel, Abort by id, deadlines and
// status codes. Usage: node grpc_accept.mjs HOST:PORT (a realtime-pacing server at speed 1, so
// that a long stream is still live when it is cancelled). Prints one PASS/FAIL line per check;
// exits 1 on a FAIL.
import assert from 'node:assert/strict';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import {createRequire} from 'node:module';
const require = createRequire(import.meta.url);
const target = process.argv[2];
const results = [];
async function check(name, fn) {
  try { await fn(); results.push(['PASS', name]); }
  catch (e) { results.push(['FAIL', name, String(e && e.stack || e).slice(0, 500)]); }
}
const opts = {keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true};
const reflDir = require.resolve('@grpc/reflection/package.json').replace('package.json', 'build/proto');
const healthProto = require.resolve('grpc-health-check/package.json').replace('package.json', 'proto/health/v1/health.proto');

function reflectionCall(version, requests) {
  const def = protoLoader.loadSync(`grpc/reflection/${version}/reflection.proto`, {...opts, includeDirs: [reflDir]});
  const pkg = grpc.loadPackageDefinition(def).grpc.reflection[version];
  const c = new pkg.ServerReflection(target, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const out = [];
    const call = c.ServerReflectionInfo();
    call.on('data', (d) => out.push(d));
    call.on('error', reject);
    call.on('end', () => { c.close(); resolve(out); });
    for (const r of requests) call.write(r);
    call.end();
  });
}
function varint(n) { const b = []; while (n > 127) { b.push((n & 127) | 128); n >>>= 7; } b.push(n); return Buffer.from(b); }

let Llm = null;
await check('reflection v1alpha: list_services', async () => {
  const [r] = await reflectionCall('v1alpha', [{list_services: ''}]);
  const names = r.list_services_response.service.map((s) => s.name);
  assert.ok(names.includes('neupims.v1.LlmService'), names.join(','));
  assert.ok(names.includes('grpc.health.v1.Health'), names.join(','));
});
await check('reflection v1: UNIMPLEMENTED (gRPC 1.51 serves v1alpha only; docs/api.md)', async () => {
  await assert.rejects(reflectionCall('v1', [{list_services: ''}]),
    (e) => e.code === grpc.status.UNIMPLEMENTED);
});
await check('reflection: build LlmService from file_containing_symbol', async () => {
  const [r] = await reflectionCall('v1alpha', [{file_containing_symbol: 'neupims.v1.LlmService'}]);
  const files = r.file_descriptor_response.file_descriptor_proto;
  assert.ok(files.length >= 1);
  const set = Buffer.concat(files.flatMap((f) => [Buffer.from([0x0a]), varint(f.length), f]));
  const def = protoLoader.loadFileDescriptorSetFromBuffer(set, opts);
  Llm = grpc.loadPackageDefinition(def).neupims.v1.LlmService;
  assert.ok(Llm);
});
const health = (() => {
  const def = protoLoader.loadSync(healthProto, opts);
  const H = grpc.loadPackageDefinition(def).grpc.health.v1.Health;
  return new H(target, grpc.credentials.createInsecure());
})();
await check('health: overall and per service SERVING, unknown service NOT_FOUND', async () => {
  const ask = (service) => new Promise((res, rej) => health.Check({service}, (e, r) => e ? rej(e) : res(r)));
  assert.equal((await ask('')).status, 'SERVING');
  assert.equal((await ask('neupims.v1.LlmService')).status, 'SERVING');
  await assert.rejects(ask('no.such.Service'), (e) => e.code === grpc.status.NOT_FOUND);
});
await check('health: Watch streams SERVING', async () => {
  const call = health.Watch({service: ''});
  const first = await new Promise((res, rej) => { call.on('data', res); call.on('error', rej); });
  assert.equal(first.status, 'SERVING');
  call.cancel();
});
const llm = Llm ? new Llm(target, grpc.credentials.createInsecure()) : null;
const unary = (m, req, md = new grpc.Metadata(), o = {}) =>
  new Promise((res, rej) => llm[m](req, md, o, (e, r) => e ? rej(e) : res(r)));
await check('GetModelInfo / GetServerInfo', async () => {
  const m = await unary('GetModelInfo', {});
  assert.ok(m.name && m.max_seq_len > 0);
  const s = await unary('GetServerInfo', {});
  assert.ok(['realtime', 'fast'].includes(s.pacing));
});
await check('Generate streams every token, then one complete', async () => {
  const call = llm.Generate({text: 'hello', max_new_tokens: 20, ignore_eos: true, seed: 3});
  const tokens = []; let complete = null, after = 0;
  for await (const msg of call) {
    if (msg.tokens) { if (complete) ++after; tokens.push(...msg.tokens.tokens); }
    if (msg.complete) complete = msg.complete;
  }
  assert.equal(tokens.length, 20);
  assert.deepEqual(tokens.map((t) => t.index), [...Array(20).keys()]);
  assert.equal(after, 0);
  assert.equal(complete.finish_reason, 'FINISH_REASON_LENGTH');
  assert.equal(complete.completion_tokens, 20);
  assert.equal(complete.prompt_tokens, 5);
  for (let i = 1; i < tokens.length; ++i) assert.ok(tokens[i].sim_time_s >= tokens[i - 1].sim_time_s);
});
await check('Complete equals Generate for the same seed', async () => {
  const a = await unary('Complete', {text: 'hello', max_new_tokens: 12, ignore_eos: true, seed: 9});
  const call = llm.Generate({text: 'hello', max_new_tokens: 12, ignore_eos: true, seed: 9});
  const ids = [];
  for await (const m of call) if (m.tokens) ids.push(...m.tokens.tokens.map((t) => t.id));
  assert.deepEqual(a.tokens.map((t) => t.id), ids);
  assert.equal(a.text.length, 12);
});
await check('client cancel mid-stream: CANCELLED locally, request freed (Abort of its id NOT_FOUND)', async () => {
  const id = 'qa13c-cancel-' + Date.now();
  const call = llm.Generate({request_id: id, prompt_length: 16, max_new_tokens: 1900, ignore_eos: true});
  let n = 0;
  const err = await new Promise((res) => {
    call.on('data', (m) => { if (m.tokens && ++n === 2) call.cancel(); });
    call.on('error', res);
    call.on('end', () => res(null));
  });
  assert.ok(err, 'stream ended without error (finished before cancel?)');
  assert.equal(err.code, grpc.status.CANCELLED);
  await new Promise((r) => setTimeout(r, 300));
  await assert.rejects(unary('Abort', {request_id: id}), (e) => e.code === grpc.status.NOT_FOUND);
});
await check('Abort by id ends the stream with FINISH_REASON_ABORTED', async () => {
  const id = 'qa13c-abort-' + Date.now();
  const call = llm.Generate({request_id: id, prompt_length: 16, max_new_tokens: 1900, ignore_eos: true});
  let n = 0, complete = null, aborted = false;
  await new Promise((res, rej) => {
    call.on('data', (m) => {
      if (m.tokens && ++n === 2 && !aborted) { aborted = true; unary('Abort', {request_id: id}).catch(rej); }
      if (m.complete) complete = m.complete;
    });
    call.on('error', rej);
    call.on('end', res);
  });
  assert.equal(complete.finish_reason, 'FINISH_REASON_ABORTED');
  assert.ok(complete.completion_tokens < 1900);
});
await check('deadline: DEADLINE_EXCEEDED', async () => {
  const call = llm.Generate({prompt_length: 16, max_new_tokens: 1900, ignore_eos: true}, new grpc.Metadata(),
    {deadline: Date.now() + 300});
  const err = await new Promise((res) => { call.on('data', () => {}); call.on('error', res); call.on('end', () => res(null)); });
  assert.ok(err, 'ended before the deadline');
  assert.equal(err.code, grpc.status.DEADLINE_EXCEEDED);
});
await check('errors: unknown model NOT_FOUND, max_new_tokens 0 INVALID_ARGUMENT, duplicate id ALREADY_EXISTS', async () => {
  await assert.rejects(unary('Complete', {model: 'nope', text: 'x', max_new_tokens: 2}), (e) => e.code === grpc.status.NOT_FOUND);
  await assert.rejects(unary('Complete', {text: 'x', max_new_tokens: 0}), (e) => e.code === grpc.status.INVALID_ARGUMENT);
  await assert.rejects(unary('Complete', {text: 'x', max_new_tokens: 5000}), (e) => e.code === grpc.status.INVALID_ARGUMENT);
  await assert.rejects(unary('Abort', {request_id: ''}), (e) => e.code === grpc.status.INVALID_ARGUMENT);
  const id = 'qa13c-dup-' + Date.now();
  const call = llm.Generate({request_id: id, prompt_length: 16, max_new_tokens: 1900, ignore_eos: true});
  await new Promise((res) => call.once('data', res));
  await assert.rejects(unary('Complete', {request_id: id, text: 'x', max_new_tokens: 2}), (e) => e.code === grpc.status.ALREADY_EXISTS);
  call.cancel();
});

for (const r of results) console.log(r.join(' | '));
const failed = results.filter((r) => r[0] === 'FAIL').length;
console.log(`${results.length - failed} passed, ${failed} failed`);
health.close(); if (llm) llm.close();
process.exit(failed ? 1 : 0);
