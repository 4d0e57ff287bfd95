// The official `openai` SDK against `neupims serve`'s HTTP API: usage `node client.mjs BASE_URL`
// (e.g. http://127.0.0.1:8000/v1). Streams a chat completion and a completion, lists and
// retrieves the model and checks that bad requests come back as the SDK's typed errors. Exits
// non-zero on failure; prints "openai-node: ok" on success. Run by tests/server/openai_node_test.cc.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.argv[2];
const client = new OpenAI({baseURL, apiKey: 'not-checked', maxRetries: 0, timeout: 60_000});

const models = [];
for await (const m of client.models.list()) models.push(m);
assert.equal(models.length, 1);
const model = models[0].id;
assert.ok(models[0].max_model_len > 0, 'max_model_len');
// models.retrieve (GET /v1/models/{model}).
const retrieved = await client.models.retrieve(model);
assert.equal(retrieved.id, model);
assert.equal(retrieved.object, 'model');

// A streamed chat completion: the role first, one content delta per token, then the usage.
const chat = await client.chat.completions.create({
  model,
  messages: [{role: 'system', content: 'Be brief.'}, {role: 'user', content: 'Hello!'}],
  max_completion_tokens: 12,
  stream: true,
  stream_options: {include_usage: true},
  ignore_eos: true,
});
let chatText = '', chatDeltas = 0, chatFinish = null, chatUsage = null, role = null;
for await (const chunk of chat) {
  assert.equal(chunk.object, 'chat.completion.chunk');
  if (chunk.usage) chatUsage = chunk.usage;
  for (const choice of chunk.choices) {
    if (choice.delta.role) role = choice.delta.role;
    if (choice.delta.content) {
      chatText += choice.delta.content;
      ++chatDeltas;
    }
    if (choice.finish_reason) chatFinish = choice.finish_reason;
  }
}
assert.equal(role, 'assistant');
assert.equal(chatDeltas, 12);
assert.equal(chatText.length, 12);
assert.equal(chatFinish, 'length');
assert.equal(chatUsage.completion_tokens, 12);
assert.equal(chatUsage.total_tokens, chatUsage.prompt_tokens + 12);

// A streamed completion.
const completion = await client.completions.create({
  model,
  prompt: 'The quick brown fox',
  max_tokens: 9,
  stream: true,
  stream_options: {include_usage: true},
  ignore_eos: true,
});
let text = '', pieces = 0, finish = null, usage = null;
for await (const chunk of completion) {
  assert.equal(chunk.object, 'text_completion');
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    if (choice.text) {
      text += choice.text;
      ++pieces;
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
assert.equal(pieces, 9);
assert.equal(text.length, 9);
assert.equal(finish, 'length');
assert.deepEqual(usage, {prompt_tokens: 19, completion_tokens: 9, total_tokens: 28});

// A bad request (n > 1) is the SDK's typed error with status 400 and OpenAI's error fields.
await assert.rejects(
    client.completions.create({model, prompt: 'x', max_tokens: 4, n: 2}), (e) => {
      const seen = `${e.constructor.name} ${e.status} ${e.message}`;
      assert.ok(e instanceof OpenAI.APIError, `APIError, got ${seen}`);
      assert.ok(e instanceof OpenAI.BadRequestError, `BadRequestError, got ${seen}`);
      assert.equal(e.status, 400);
      assert.equal(e.param, 'n');
      assert.equal(e.type, 'invalid_request_error');
      return true;
    });
// A sampling field out of OpenAI's range is refused too, naming it.
await assert.rejects(
    client.completions.create({model, prompt: 'x', max_tokens: 4, temperature: 3}),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
// An unknown model: NotFoundError (404), also from models.retrieve.
await assert.rejects(
    client.models.retrieve('no-such-model'), (e) => e instanceof OpenAI.NotFoundError);
await assert.rejects(
    client.completions.create({model: 'no-such-model', prompt: 'x', max_tokens: 4}),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);

console.log('openai-node: ok');
