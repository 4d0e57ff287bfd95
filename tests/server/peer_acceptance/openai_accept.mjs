// Acceptance of `neupims serve`'s OpenAI-compatible HTTP API (docs/api.md) with the official
// openai SDK: chat and completions, streamed and not, usage in the stream, n, max_tokens bounds,
// stop, and every error in OpenAI's shape {"error": {message, type, param, code}}, read both
// through the SDK's typed errors and raw. Usage: node openai_accept.mjs BASE_URL (a fast-pacing
// server; e.g. http://127.0.0.1:8000/v1). Prints one PASS/FAIL line per check; exits 1 on a FAIL.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.argv[2];
const client = new OpenAI({baseURL, apiKey: 'x', maxRetries: 0, timeout: 60_000});
const results = [];
async function check(name, fn) {
  try { await fn(); results.push(['PASS', name]); }
  catch (e) { results.push(['FAIL', name, String(e && e.message || e).slice(0, 400)]); }
}
// OpenAI's error object, read raw (what the SDK parses).
async function rawError(path, body, {contentType = 'application/json', method = 'POST'} = {}) {
  const r = await fetch(baseURL + path, {method, headers: {'content-type': contentType}, body});
  const text = await r.text();
  let j; try { j = JSON.parse(text); } catch { throw new Error(`not JSON (${r.status}): ${text}`); }
  assert.ok(j.error && typeof j.error === 'object', 'error object: ' + text);
  assert.deepEqual(Object.keys(j.error).sort(), ['code', 'message', 'param', 'type'], text);
  assert.equal(typeof j.error.message, 'string');
  assert.equal(typeof j.error.type, 'string');
  assert.ok(j.error.param === null || typeof j.error.param === 'string', 'param ' + text);
  return {status: r.status, error: j.error, headers: r.headers};
}
function sdkError(cls, status, extra = () => true) {
  return (e) => {
    assert.ok(e instanceof OpenAI.APIError, 'APIError: ' + e);
    if (cls) assert.ok(e instanceof cls, `${cls.name}: got ${e.constructor.name} ${e.message}`);
    assert.equal(e.status, status, e.message);
    assert.ok(typeof e.error?.message === 'string', 'error.message');
    assert.ok('type' in e.error && 'param' in e.error && 'code' in e.error, JSON.stringify(e.error));
    extra(e);
    return true;
  };
}

const models = [];
for await (const m of client.models.list()) models.push(m);
const model = models[0].id;
const ctx = models[0].max_model_len;

await check('chat non-streamed: message, finish, usage', async () => {
  const r = await client.chat.completions.create({model, messages: [{role: 'user', content: 'Hi'}],
    max_completion_tokens: 7, ignore_eos: true});
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].message.content.length, 7);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 7);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 7);
  assert.ok(r.id.startsWith('chatcmpl-'));
});
await check('chat non-streamed with deprecated max_tokens', async () => {
  const r = await client.chat.completions.create({model, messages: [{role: 'user', content: 'Hi'}],
    max_tokens: 4, ignore_eos: true});
  assert.equal(r.usage.completion_tokens, 4);
});
await check('chat streamed with include_usage: usage null until the last chunk', async () => {
  const s = await client.chat.completions.create({model, messages: [{role: 'user', content: 'Hi'}],
    max_completion_tokens: 5, ignore_eos: true, stream: true, stream_options: {include_usage: true}});
  const chunks = [];
  for await (const c of s) chunks.push(c);
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 5);
  for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);
  const text = chunks.flatMap((c) => c.choices.map((x) => x.delta.content ?? '')).join('');
  assert.equal(text.length, 5);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const ids = new Set(chunks.map((c) => c.id));
  assert.equal(ids.size, 1);
});
await check('chat streamed without include_usage: no usage chunk', async () => {
  const s = await client.chat.completions.create({model, messages: [{role: 'user', content: 'Hi'}],
    max_completion_tokens: 3, ignore_eos: true, stream: true});
  const chunks = [];
  for await (const c of s) chunks.push(c);
  assert.ok(chunks.every((c) => c.usage === undefined || c.usage === null));
  assert.ok(chunks.every((c) => c.choices.length === 1));
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
});
await check('completion non-streamed', async () => {
  const r = await client.completions.create({model, prompt: 'abc', max_tokens: 6, ignore_eos: true});
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text.length, 6);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.deepEqual(r.usage, {prompt_tokens: 3, completion_tokens: 6, total_tokens: 9});
});
await check('completion with token-id prompt', async () => {
  const r = await client.completions.create({model, prompt: [1, 2, 3, 4], max_tokens: 2, ignore_eos: true});
  assert.equal(r.usage.prompt_tokens, 4);
});
await check('completion streamed with include_usage', async () => {
  const s = await client.completions.create({model, prompt: 'abc', max_tokens: 6, ignore_eos: true,
    stream: true, stream_options: {include_usage: true}});
  const chunks = [];
  for await (const c of s) chunks.push(c);
  assert.deepEqual(chunks.at(-1).usage, {prompt_tokens: 3, completion_tokens: 6, total_tokens: 9});
});
await check('without ignore_eos: finish_reason length or stop, usage consistent', async () => {
  for (let i = 0; i < 5; ++i) {
    const r = await client.completions.create({model, prompt: 'abc', max_tokens: 40, seed: i});
    assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
    assert.equal(r.choices[0].text.length, r.usage.completion_tokens);
    assert.ok(r.usage.completion_tokens <= 40);
  }
});
await check('n=1 accepted', async () => {
  const r = await client.completions.create({model, prompt: 'x', max_tokens: 2, n: 1, ignore_eos: true});
  assert.equal(r.choices.length, 1);
});
await check('n=2 refused 400 param n (documented: n 1 only)', async () => {
  await assert.rejects(client.chat.completions.create({model, messages: [{role: 'user', content: 'x'}],
    max_completion_tokens: 2, n: 2}), sdkError(OpenAI.BadRequestError, 400, (e) => assert.equal(e.param, 'n')));
});
await check('stop: string and list accepted', async () => {
  await client.completions.create({model, prompt: 'x', max_tokens: 3, stop: '\n'});
  await client.chat.completions.create({model, messages: [{role: 'user', content: 'x'}],
    max_completion_tokens: 3, stop: ['a', 'b']});
});
await check('stop of a wrong type: 400 param stop', async () => {
  await assert.rejects(client.completions.create({model, prompt: 'x', max_tokens: 3, stop: 7}),
    sdkError(OpenAI.BadRequestError, 400, (e) => assert.equal(e.param, 'stop')));
});
await check('max_tokens 1 gives one token', async () => {
  const r = await client.completions.create({model, prompt: 'x', max_tokens: 1, ignore_eos: true});
  assert.equal(r.usage.completion_tokens, 1);
});
await check('max_tokens 0: 400 param max_tokens', async () => {
  await assert.rejects(client.completions.create({model, prompt: 'x', max_tokens: 0}),
    sdkError(OpenAI.BadRequestError, 400, (e) => assert.equal(e.param, 'max_tokens')));
});
await check('max_tokens -1: 400 param max_tokens', async () => {
  await assert.rejects(client.completions.create({model, prompt: 'x', max_tokens: -1}),
    sdkError(OpenAI.BadRequestError, 400, (e) => assert.equal(e.param, 'max_tokens')));
});
await check('max_completion_tokens 0: 400 param max_completion_tokens', async () => {
  await assert.rejects(client.chat.completions.create({model, messages: [{role: 'user', content: 'x'}],
    max_completion_tokens: 0}),
    sdkError(OpenAI.BadRequestError, 400, (e) => assert.equal(e.param, 'max_completion_tokens')));
});
await check('prompt + max_tokens exactly the context: accepted', async () => {
  const r = await client.completions.create({model, prompt: 'ab', max_tokens: ctx - 2, ignore_eos: true});
  assert.equal(r.usage.total_tokens, ctx);
});
await check('prompt + max_tokens one over the context: 413', async () => {
  await assert.rejects(client.completions.create({model, prompt: 'ab', max_tokens: ctx - 1}),
    sdkError(null, 413));
});
await check('too long prompt: 413 (SDK APIError), OpenAI shape', async () => {
  await assert.rejects(client.completions.create({model, prompt: 'a'.repeat(ctx + 10), max_tokens: 1}),
    sdkError(null, 413));
  const {status} = await rawError('/completions', JSON.stringify({prompt: 'a'.repeat(ctx + 10), max_tokens: 1}));
  assert.equal(status, 413);
});
await check('too long prompt, streamed: 413 before any event', async () => {
  await assert.rejects(client.completions.create({model, prompt: 'a'.repeat(ctx + 10), max_tokens: 1, stream: true}),
    sdkError(null, 413));
});
await check('bad model: 404 NotFoundError, param model', async () => {
  await assert.rejects(client.chat.completions.create({model: 'gpt-4o', messages: [{role: 'user', content: 'x'}]}),
    sdkError(OpenAI.NotFoundError, 404, (e) => assert.equal(e.param, 'model')));
});
await check('bad model streamed: 404 before any event', async () => {
  await assert.rejects(client.chat.completions.create({model: 'gpt-4o', stream: true,
    messages: [{role: 'user', content: 'x'}]}), sdkError(OpenAI.NotFoundError, 404));
});
await check('bad JSON: 400, OpenAI shape', async () => {
  const {status, error} = await rawError('/chat/completions', '{"messages": [');
  assert.equal(status, 400);
  assert.equal(error.type, 'invalid_request_error');
});
await check('JSON not an object: 400, OpenAI shape', async () => {
  const {status} = await rawError('/completions', '[1,2]');
  assert.equal(status, 400);
});
await check('missing messages: 400 param messages', async () => {
  const {status, error} = await rawError('/chat/completions', '{"max_tokens": 2}');
  assert.equal(status, 400);
  assert.equal(error.param, 'messages');
});
await check('empty prompt: 400', async () => {
  await assert.rejects(client.completions.create({model, prompt: '', max_tokens: 2}),
    sdkError(OpenAI.BadRequestError, 400));
});
await check('unknown path: 404 OpenAI shape', async () => {
  const {status} = await rawError('/nope', '{}');
  assert.equal(status, 404);
});
await check('wrong method: 405 with Allow, OpenAI shape', async () => {
  const {status, headers} = await rawError('/completions', undefined, {method: 'GET'});
  assert.equal(status, 405);
  assert.ok(headers.get('allow'), 'Allow header');
});
await check('code field is the HTTP status (docs/api.md)', async () => {
  const {status, error} = await rawError('/completions', '{bad');
  assert.equal(error.code, status);
});
// The SDK ends an aborted stream's iteration quietly or with an error; either way the server
// goes on serving (the dropped connection aborts the request in the engine).
await check('abort mid-stream (AbortController): the server goes on serving', async () => {
  const ac = new AbortController();
  const s = await client.completions.create({model, prompt: 'x', max_tokens: 1500, ignore_eos: true,
    stream: true}, {signal: ac.signal});
  let n = 0;
  try { for await (const c of s) { if (++n === 3) ac.abort(); } } catch (e) { /* aborted */ }
  const r = await client.completions.create({model, prompt: 'x', max_tokens: 2, ignore_eos: true});
  assert.equal(r.usage.completion_tokens, 2);
});
await check('concurrent streams (8) all complete', async () => {
  const runs = await Promise.all([...Array(8).keys()].map(async (i) => {
    const s = await client.chat.completions.create({model, messages: [{role: 'user', content: 'q' + i}],
      max_completion_tokens: 20, ignore_eos: true, stream: true, stream_options: {include_usage: true}});
    let u = null; for await (const c of s) if (c.usage) u = c.usage; return u.completion_tokens;
  }));
  assert.deepEqual(runs, Array(8).fill(20));
});

for (const r of results) console.log(r.join(' | '));
const failed = results.filter((r) => r[0] === 'FAIL').length;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
