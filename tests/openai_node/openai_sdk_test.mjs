// The official `openai` npm package against textgen-server's OpenAI-compatible API: streamed
// and plain chat, completions, models, and an error, each compared with what the gRPC API gives
// for the same prompt (through textgen-client). Started by run_openai_sdk_test.sh, which
// installs the package; usage: node openai_sdk_test.mjs BIN_DIR MODELS_DIR
import assert from "node:assert/strict";
import {execFileSync, spawn} from "node:child_process";
import {readFileSync} from "node:fs";
import OpenAI from "openai";

const [binDir, modelsDir] = process.argv.slice(2);
const templates = `${modelsDir}/../chat-templates`;

// Starts textgen-server on free ports; resolves with its HTTP and gRPC ports once it serves.
function startServer() {
  const server = spawn(`${binDir}/textgen-server`, [
    "--model", `${modelsDir}/stories260K.gguf`, "--listen", "127.0.0.1:0",
    "--http-listen", "127.0.0.1:0",
    "--chat-template", `${templates}/templates/Qwen-Qwen2.5-7B-Instruct.jinja`,
    // The comparisons below are exact: a prompt computed in one pass must equal the same prompt
    // served partly from the prefix cache, which the default (auto) promises only at the
    // AVX-512 kernel levels (at avx2 it is off; docs/kernels.md: Batch invariance).
    "--batch-invariant", "on",
  ], {stdio: ["ignore", "pipe", "pipe"]});
  let log = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 30000);
    const onData = (data) => {
      log += data;
      const http = log.match(/chat page on \S+ \(port (\d+)/);
      const grpc = log.match(/serving textgen\.v1\.TextGeneration on \S+ \(port (\d+)\)/);
      if (http && grpc) {
        clearTimeout(timer);
        resolve({server, httpPort: Number(http[1]), grpcPort: Number(grpc[1])});
      }
    };
    server.stdout.on("data", onData);
    server.stderr.on("data", onData);
    server.on("exit", (code) => reject(new Error(`server exited (${code}):\n${log}`)));
  });
}

// gRPC Generate through textgen-client (greedy): the streamed text and token logprobs.
function grpcGenerate(grpcPort, prompt, maxNewTokens, addBos) {
  const args = ["generate", "--server", `127.0.0.1:${grpcPort}`, "--prompt", prompt,
                "--max-new-tokens", String(maxNewTokens), "--json"];
  if (addBos !== undefined) args.push("--add-bos", String(addBos));
  const out = execFileSync(`${binDir}/textgen-client`, args, {encoding: "utf8"});
  let text = "";
  const logprobs = [];
  for (const line of out.split("\n").filter((l) => l.trim())) {
    const message = JSON.parse(line);
    text += message.text || "";
    for (const token of message.tokens || []) logprobs.push(token.logprob);
  }
  return {text, logprobs};
}

function close(a, b) {
  assert.equal(a.length, b.length);
  a.forEach((x, i) => assert.ok(Math.abs(x - b[i]) < 1e-6, `logprob ${i}: ${x} vs ${b[i]}`));
}

async function main() {
  const {server, httpPort, grpcPort} = await startServer();
  let failed = false;
  try {
    const client = new OpenAI({baseURL: `http://127.0.0.1:${httpPort}/v1`, apiKey: "unused",
                               maxRetries: 0});

    // Models.
    const models = [];
    for await (const m of client.models.list()) models.push(m.id);
    assert.deepEqual(models, ["stories260K.gguf"]);
    assert.equal((await client.models.retrieve("stories260K.gguf")).id, "stories260K.gguf");
    const model = models[0];

    // Completions, plain and streamed, against gRPC Generate of the same prompt.
    const prompt = "Once upon a time";
    const grpc = grpcGenerate(grpcPort, prompt, 32);
    const completion = await client.completions.create(
        {model, prompt, max_tokens: 32, temperature: 0, logprobs: 0});
    assert.equal(completion.object, "text_completion");
    assert.equal(completion.choices[0].text, grpc.text);
    close(completion.choices[0].logprobs.token_logprobs, grpc.logprobs);
    assert.equal(completion.usage.completion_tokens, 32);
    let streamed = "";
    let chunks = 0;
    const completionStream = await client.completions.create(
        {model, prompt, max_tokens: 32, temperature: 0, stream: true});
    for await (const chunk of completionStream) {
      chunks++;
      streamed += chunk.choices.map((c) => c.text).join("");
    }
    assert.equal(streamed, grpc.text);
    assert.ok(chunks > 3, `${chunks} chunks`);
    console.log(`ok completions: ${JSON.stringify(grpc.text)} (${chunks} chunks streamed)`);

    // Chat, plain and streamed, against gRPC Generate of the text jinja2 renders.
    const conversation = JSON.parse(
        readFileSync(`${templates}/conversations/03-user-only.json`, "utf8")).messages;
    const rendered = readFileSync(
        `${templates}/expected/Qwen-Qwen2.5-7B-Instruct/03-user-only.agp-true.txt`, "utf8");
    const grpcChat = grpcGenerate(grpcPort, rendered, 24, false);
    const chat = await client.chat.completions.create(
        {model, messages: conversation, max_tokens: 24, temperature: 0, logprobs: true});
    assert.equal(chat.object, "chat.completion");
    assert.equal(chat.choices[0].message.role, "assistant");
    assert.equal(chat.choices[0].message.content, grpcChat.text);
    close(chat.choices[0].logprobs.content.map((t) => t.logprob), grpcChat.logprobs);
    let chatText = "";
    let usage = null;
    let finish = null;
    const chatStream = await client.chat.completions.create(
        {model, messages: conversation, max_tokens: 24, temperature: 0, stream: true,
         stream_options: {include_usage: true}});
    for await (const chunk of chatStream) {
      for (const c of chunk.choices) {
        chatText += c.delta.content || "";
        finish = c.finish_reason || finish;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(chatText, grpcChat.text);
    assert.equal(finish, "length");
    assert.equal(usage.completion_tokens, 24);
    console.log(`ok chat: ${JSON.stringify(grpcChat.text)}`);

    // The SDK's helper that assembles a stream into a whole message.
    const runner = client.chat.completions.stream(
        {model, messages: conversation, max_tokens: 24, temperature: 0});
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].message.content, grpcChat.text);

    // A schema keyword that cannot be enforced: BadRequestError naming it and its pointer.
    await assert.rejects(
        client.chat.completions.create({model, messages: conversation, response_format: {
          type: "json_schema",
          json_schema: {name: "n", schema: {type: "object", properties: {
            price: {type: "number", multipleOf: 5}}}}}}),
        (e) => {
          assert.ok(e instanceof OpenAI.BadRequestError, String(e));
          assert.equal(e.status, 400);
          assert.equal(e.param, "response_format");
          assert.match(e.message, /multipleOf/);
          assert.match(e.message, /\/properties\/price/);
          return true;
        });
    // A field this server does not implement: refused by name.
    await assert.rejects(
        client.chat.completions.create({model, messages: conversation, logit_bias: {"5": 10}}),
        (e) => {
          assert.equal(e.status, 400);
          assert.equal(e.param, "logit_bias");
          assert.match(e.message, /logit_bias: is not supported by this server/);
          return true;
        });
    // An unknown model: NotFoundError.
    await assert.rejects(client.completions.create({model: "gpt-4o", prompt}),
                         (e) => e instanceof OpenAI.NotFoundError);
    console.log("ok errors");
  } catch (e) {
    console.error(e);
    failed = true;
  } finally {
    server.kill("SIGTERM");
  }
  process.exit(failed ? 1 : 0);
}

main();
