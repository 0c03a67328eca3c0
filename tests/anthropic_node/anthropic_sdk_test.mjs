// The official `@anthropic-ai/sdk` npm package, unmodified, against textgen-server's Anthropic
// Messages API: messages.create, messages.stream and its finalMessage() (equal to the whole
// message), a forced tool call, countTokens, and errors surfacing as the SDK's BadRequestError,
// NotFoundError and AuthenticationError. The model is a random-weight one with Qwen3's
// vocabulary (written with textgen-synth-model), served with Qwen3's template and API keys.
// Started by run_anthropic_sdk_test.sh, which installs the package; usage:
//   node anthropic_sdk_test.mjs BIN_DIR MODELS_DIR
import assert from "node:assert/strict";
import {execFileSync, spawn} from "node:child_process";
import {mkdtempSync, rmSync, writeFileSync} from "node:fs";
import {tmpdir} from "node:os";
import Anthropic from "@anthropic-ai/sdk";

const [binDir, modelsDir] = process.argv.slice(2);
const templates = `${modelsDir}/../chat-templates/templates`;
const key = "anthropic-sdk-test-key-0123456789";

// Writes the model and the keys file into `dir`; returns the model's path.
function prepare(dir) {
  const model = `${dir}/anthropic-qwen3.gguf`;
  execFileSync(`${binDir}/textgen-synth-model`, [
    "--shape", "custom", "--arch", "qwen3", "--dim", "64", "--layers", "2", "--heads", "4",
    "--kv-heads", "2", "--head-dim", "32", "--ffn", "128", "--ctx", "2048", "--type", "f32",
    "--vocab", `${modelsDir}/vocab/ggml-vocab-qwen3.gguf`, "--out", model]);
  writeFileSync(`${dir}/keys`, `${key} sdk\n`);
  return model;
}

// Starts textgen-server on free ports; resolves with its HTTP port once it serves.
function startServer(dir, model) {
  const server = spawn(`${binDir}/textgen-server`, [
    "--model", model, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
    "--chat-template", `${templates}/Qwen-Qwen3-0.6B.jinja`, "--api-keys-file", `${dir}/keys`,
    // Whole and streamed answers are compared exactly: the second request must not be served
    // from the first's cached rows in another batch shape.
    "--prefix-cache", "off",
  ], {stdio: ["ignore", "pipe", "pipe"]});
  let log = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 30000);
    const onData = (data) => {
      log += data;
      const http = log.match(/chat page on \S+ \(port (\d+)/);
      if (http && /serving textgen\.v1\.TextGeneration/.test(log)) {
        clearTimeout(timer);
        resolve({server, httpPort: Number(http[1])});
      }
    };
    server.stdout.on("data", onData);
    server.stderr.on("data", onData);
    server.on("exit", (code) => reject(new Error(`server exited (${code}):\n${log}`)));
  });
}

// The server logs its ports before the chat template's grammar vocabulary is built (seconds
// for Qwen3's 151k tokens): poll until the API stops answering 503.
async function waitServing(baseURL) {
  for (let i = 0; i < 600; i++) {
    const r = await fetch(`${baseURL}/v1/messages/count_tokens`, {
      method: "POST", headers: {"content-type": "application/json", "x-api-key": key},
      body: JSON.stringify({model: "anthropic-qwen3.gguf", messages: [{role: "user", content: "hi"}]}),
    });
    if (r.status !== 503) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("the API still answers 503 after 60 s");
}

const weather = {
  name: "get_weather",
  description: "The forecast for a city",
  input_schema: {
    type: "object",
    properties: {
      city: {type: "string", enum: ["Paris", "Tokyo", "Lima"]},
      days: {type: "integer", minimum: 1, maximum: 7},
    },
    required: ["city", "days"],
    additionalProperties: false,
  },
};

async function main() {
  const dir = mkdtempSync(`${tmpdir()}/anthropic-sdk-`);
  const {server, httpPort} = await startServer(dir, prepare(dir));
  let failed = false;
  try {
    const baseURL = `http://127.0.0.1:${httpPort}`;
    await waitServing(baseURL);
    // apiKey: this SDK version sends it as "Authorization: Bearer"; x-api-key is tried below.
    const client = new Anthropic({baseURL, apiKey: key, maxRetries: 0});
    const model = "anthropic-qwen3.gguf";
    const messages = [{role: "user", content: "Tell me about the sea."}];
    const request = {model, max_tokens: 24, temperature: 0, messages,
                     thinking: {type: "disabled"}, system: "Be brief."};

    // messages.create: a whole message.
    const whole = await client.messages.create(request);
    assert.equal(whole.type, "message");
    assert.equal(whole.role, "assistant");
    assert.equal(whole.model, model);
    assert.match(whole.id, /^msg_[0-9A-Za-z]{24}$/);
    assert.ok(["max_tokens", "end_turn"].includes(whole.stop_reason), whole.stop_reason);
    assert.ok(whole.usage.output_tokens > 0 && whole.usage.output_tokens <= 24);
    assert.ok(whole.content.every((b) => b.type === "text"), JSON.stringify(whole.content));

    // messages.stream: the events the SDK assembles make the same message.
    const events = [];
    const stream = client.messages.stream(request);
    stream.on("streamEvent", (e) => events.push(e.type));
    let text = "";
    stream.on("text", (delta) => { text += delta; });
    // The SDK adds its own fields to the assembled message (parsed_output, stop_details).
    const {parsed_output: parsed, stop_details: details, ...final} = await stream.finalMessage();
    assert.equal(parsed, null);
    assert.equal(details, undefined);
    assert.notEqual(final.id, whole.id);
    assert.deepEqual({...final, id: whole.id}, whole);
    assert.equal(text, whole.content.map((b) => b.text).join(""));
    assert.equal(events[0], "message_start");
    assert.deepEqual(events.slice(-2), ["message_delta", "message_stop"]);
    // The raw stream through create({stream: true}).
    const raw = await client.messages.create({...request, stream: true});
    let rawText = "";
    let stopReason = null;
    for await (const e of raw) {
      if (e.type === "content_block_delta" && e.delta.type === "text_delta") rawText += e.delta.text;
      if (e.type === "message_delta") stopReason = e.delta.stop_reason;
    }
    assert.equal(rawText, text);
    assert.equal(stopReason, whole.stop_reason);
    console.log(`ok create and stream: ${JSON.stringify(text)} (${events.length} events)`);

    // A forced tool call: one tool_use block whose input the schema accepts.
    const toolRequest = {model, max_tokens: 200, temperature: 0, thinking: {type: "disabled"},
                         tools: [weather], tool_choice: {type: "tool", name: "get_weather"},
                         messages: [{role: "user", content: "Weather in Paris?"}]};
    const call = await client.messages.create(toolRequest);
    assert.equal(call.stop_reason, "tool_use");
    assert.equal(call.content.length, 1);
    const use = call.content[0];
    assert.equal(use.type, "tool_use");
    assert.equal(use.name, "get_weather");
    assert.deepEqual(Object.keys(use.input).sort(), ["city", "days"]);
    assert.ok(["Paris", "Tokyo", "Lima"].includes(use.input.city), JSON.stringify(use.input));
    assert.ok(Number.isInteger(use.input.days) && use.input.days >= 1 && use.input.days <= 7);
    const streamedCall = await client.messages.stream(toolRequest).finalMessage();
    assert.deepEqual(streamedCall.content[0].input, use.input);
    // The call's result, sent back: the conversation goes on.
    const next = await client.messages.create({
      model, max_tokens: 8, temperature: 0, thinking: {type: "disabled"}, tools: [weather],
      messages: [...toolRequest.messages, {role: "assistant", content: call.content},
                 {role: "user", content: [{type: "tool_result", tool_use_id: use.id,
                                           content: "Sunny"}]}]});
    assert.equal(next.type, "message");
    console.log(`ok tool use: ${JSON.stringify(use.input)}`);

    // countTokens: the rendered prompt, tools included.
    const plain = await client.messages.countTokens({model, messages, system: "Be brief.",
                                                     thinking: {type: "disabled"}});
    assert.equal(plain.input_tokens, whole.usage.input_tokens);
    const withTools = await client.messages.countTokens({model, messages, tools: [weather]});
    assert.ok(withTools.input_tokens > plain.input_tokens);
    console.log(`ok countTokens: ${plain.input_tokens}, with tools ${withTools.input_tokens}`);

    // Errors: the SDK's classes, with Anthropic's error types.
    await assert.rejects(client.messages.create({...request, top_p: 0.5}), (e) => {
      assert.ok(e instanceof Anthropic.BadRequestError, String(e));
      assert.equal(e.status, 400);
      assert.equal(e.type, "invalid_request_error");
      assert.match(e.apiMessage, /^top_p: has no effect with temperature 0/);
      return true;
    });
    await assert.rejects(client.messages.create({...toolRequest, tools: [{
      name: "buy", input_schema: {type: "object", properties: {
        price: {type: "number", multipleOf: 5}}}}], tool_choice: {type: "any"}}), (e) => {
      assert.ok(e instanceof Anthropic.BadRequestError, String(e));
      assert.match(e.apiMessage, /tools\[0\]\.input_schema: .*multipleOf.* at \/properties\/price/);
      return true;
    });
    await assert.rejects(client.messages.create({...request, model: "claude-opus-4"}),
                         (e) => e instanceof Anthropic.NotFoundError && e.type === "not_found_error");
    const wrong = new Anthropic({baseURL, apiKey: "wrong-key-but-long-enough", maxRetries: 0});
    await assert.rejects(wrong.messages.create(request), (e) => {
      assert.ok(e instanceof Anthropic.AuthenticationError, String(e));
      assert.equal(e.status, 401);
      assert.equal(e.type, "authentication_error");
      return true;
    });
    // Anthropic's own header, as other clients send it.
    const viaHeader = new Anthropic({baseURL, apiKey: null, maxRetries: 0,
                                     defaultHeaders: {"x-api-key": key}});
    const counted = await viaHeader.messages.countTokens({model, messages});
    assert.equal(counted.input_tokens,
                 (await client.messages.countTokens({model, messages})).input_tokens);
    console.log("ok errors and keys");
  } catch (e) {
    console.error(e);
    failed = true;
  } finally {
    server.kill("SIGTERM");
    rmSync(dir, {recursive: true, force: true});
  }
  process.exit(failed ? 1 : 0);
}

main();
