// The official `openai` npm package's agent-facing helpers against textgen-server, unmodified:
// structured output parsed by the SDK with a zod schema (chat.completions.parse +
// zodResponseFormat), tool calls (plain, and reassembled from a stream by the SDK's stream
// helper), the SDK's tool runner executing a local function over two rounds, parallel_tool_calls
// false, tool_choice "none", and reasoning_content before a structured answer. The model is a random-weight one with Qwen3's vocabulary
// (qwen3_server.mjs), so every valid object or call is the server's constraint at work.
// Started by run_openai_sdk_test.sh; usage: node agents_test.mjs BIN_DIR MODELS_DIR
import assert from "node:assert/strict";
import OpenAI from "openai";
import {zodFunction, zodResponseFormat} from "openai/helpers/zod";
import {z} from "zod";

import {assertNoMarkup, kNoThinking, log, runWithServer} from "./qwen3_server.mjs";

const [binDir, modelsDir] = process.argv.slice(2);

// Strings by pattern rather than maxLength: JSON Schema counts a string's length in code points
// and zod in UTF-16 units, so a noise model's astral character at the limit would be valid for
// the server and invalid for zod.
const Forecast = z.object({
  city: z.string().regex(/^[A-Za-z ]{1,12}$/),
  unit: z.enum(["celsius", "fahrenheit"]),
  days: z.number().int().min(1).max(7),
  alerts: z.array(z.enum(["wind", "rain", "heat"])).max(2),
  note: z.string().regex(/^[a-z]{0,6}$/).nullable(),
});

const WeatherArgs = z.object({
  city: z.string().regex(/^[A-Za-z ]{1,12}$/),
  unit: z.enum(["celsius", "fahrenheit"]),
});
const TimeArgs = z.object({zone: z.enum(["UTC", "CET", "PST"])});
const Zone = z.object({zone: z.enum(["UTC", "CET", "PST"])});

const messages = [
  {role: "system", content: "You are a weather assistant."},
  {role: "user", content: "What is the weather in Paris, and what time is it there?"},
];

async function main(server) {
  const client = new OpenAI({baseURL: server.baseURL, apiKey: "unused", maxRetries: 0});
  const base = {model: server.model, messages, chat_template_kwargs: kNoThinking, max_tokens: 400};

  // Structured output: the SDK parses message.content with the zod schema into message.parsed
  // (it throws on invalid JSON, a schema violation, or finish_reason "length").
  for (const seed of [null, 1, 2, 3]) {
    const decoding = seed === null ? {temperature: 0} : {temperature: 1, seed};
    const completion = await client.chat.completions.parse(
        {...base, ...decoding, response_format: zodResponseFormat(Forecast, "forecast")});
    const choice = completion.choices[0];
    assert.equal(choice.finish_reason, "stop");
    assert.deepEqual(choice.message.parsed, Forecast.parse(JSON.parse(choice.message.content)));
    assertNoMarkup(choice.message.content, "content");
    log(`ok parse (seed ${seed}): ${JSON.stringify(choice.message.parsed)}`);
  }

  // Tool calls, forced: the same greedy request plain and through the SDK's stream helper.
  const tools = [zodFunction({name: "get_weather", parameters: WeatherArgs}),
                 zodFunction({name: "get_time", parameters: TimeArgs})];
  const schemas = {get_weather: WeatherArgs, get_time: TimeArgs};
  const toolRequest = {...base, temperature: 0, tools, tool_choice: "required",
                       parallel_tool_calls: false};
  const plain = await client.chat.completions.create(toolRequest);
  const plainChoice = plain.choices[0];
  assert.equal(plainChoice.finish_reason, "tool_calls");
  assert.equal(plainChoice.message.content, null);
  assert.equal(plainChoice.message.tool_calls.length, 1);
  for (const call of plainChoice.message.tool_calls) {
    assert.equal(call.type, "function");
    assert.match(call.id, /^call_/);
    schemas[call.function.name].parse(JSON.parse(call.function.arguments));
  }
  const stream = client.chat.completions.stream(toolRequest);
  let argumentDeltas = 0;
  stream.on("tool_calls.function.arguments.delta", () => ++argumentDeltas);
  const streamed = await stream.finalChatCompletion();
  const streamedChoice = streamed.choices[0];
  assert.equal(streamedChoice.finish_reason, "tool_calls");
  assert.ok(argumentDeltas > 1, `${argumentDeltas} argument deltas`);
  const strip = (calls) => calls.map((c) => ({name: c.function.name, args: c.function.arguments}));
  assert.deepEqual(strip(streamedChoice.message.tool_calls),
                   strip(plainChoice.message.tool_calls));
  for (const call of streamedChoice.message.tool_calls) {
    // The stream helper parses strict tools' arguments with their zod schema.
    assert.deepEqual(call.function.parsed_arguments,
                     schemas[call.function.name].parse(JSON.parse(call.function.arguments)));
  }
  assertNoMarkup(streamedChoice.message.content, "streamed content");
  log(`ok tool call, plain = streamed: ${JSON.stringify(strip(plainChoice.message.tool_calls))}`);

  // A named function, sampled: always that function.
  for (const seed of [1, 2, 3]) {
    const c = await client.chat.completions.create(
        {...base, temperature: 1, seed, tools, parallel_tool_calls: false,
         tool_choice: {type: "function", function: {name: "get_time"}}});
    assert.equal(c.choices[0].finish_reason, "tool_calls");
    assert.equal(c.choices[0].message.tool_calls.length, 1);
    const call = c.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, "get_time");
    TimeArgs.parse(JSON.parse(call.function.arguments));
  }
  log("ok named function");

  // parallel_tool_calls false: at most one call, whatever the sampling.
  for (const seed of [4, 5, 6, 7]) {
    const c = await client.chat.completions.create(
        {...base, temperature: 1, seed, tools, tool_choice: "required", parallel_tool_calls: false});
    assert.equal(c.choices[0].message.tool_calls.length, 1, JSON.stringify(c.choices[0]));
  }
  log("ok parallel_tool_calls false");

  // tool_choice "none": tools given, never a call (plain and streamed).
  for (const seed of [null, 8, 9]) {
    const decoding = seed === null ? {temperature: 0} : {temperature: 1, seed};
    const c = await client.chat.completions.create(
        {...base, ...decoding, max_tokens: 24, tools, tool_choice: "none"});
    assert.equal(c.choices[0].message.tool_calls, undefined);
    assert.notEqual(c.choices[0].finish_reason, "tool_calls");
    assert.equal(typeof c.choices[0].message.content, "string");
  }
  // (Tools neither auto-parsed nor strict: with those the stream helper refuses an answer cut by
  // max_tokens, which a noise model's free text always is.)
  const plainTools = tools.map((t) => ({type: t.type, function: {...t.function, strict: false}}));
  const none = await client.chat.completions.stream(
      {...base, temperature: 0, max_tokens: 24, tools: plainTools, tool_choice: "none"})
      .finalChatCompletion();
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.equal(none.choices[0].finish_reason, "length");
  log("ok tool_choice none");

  // Reasoning (the template left to think, within the request's reasoning_budget): the block
  // comes as reasoning_content, the answer after it is the constrained JSON, and the stream's
  // reasoning_content and content deltas add up to the same. A noise model opens the block on
  // some seeds only; at least one of these must.
  let reasoned = 0;
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const request = {model: server.model, messages, max_tokens: 200, temperature: 1, seed,
                     reasoning_budget: 4, response_format: zodResponseFormat(Zone, "zone")};
    const m = (await client.chat.completions.parse(request)).choices[0].message;
    assert.deepEqual(m.parsed, Zone.parse(JSON.parse(m.content)));
    assertNoMarkup(m.content, "content");
    if (m.reasoning_content === undefined) continue;
    ++reasoned;
    assertNoMarkup(m.reasoning_content, "reasoning_content");
    let reasoning = "";
    let content = "";
    for await (const chunk of await client.chat.completions.create({...request, stream: true})) {
      reasoning += chunk.choices[0]?.delta.reasoning_content ?? "";
      content += chunk.choices[0]?.delta.content ?? "";
    }
    assert.equal(reasoning, m.reasoning_content);
    assert.equal(content, m.content);
  }
  assert.ok(reasoned > 0, "no seed opened a reasoning block");
  log(`ok reasoning_content (${reasoned} of 6 seeds reasoned)`);

  // The SDK's tool runner: it calls the model, runs the local function on the parsed arguments,
  // sends the result back with the assistant's tool_calls message, and calls the model again.
  const calledBy = {};
  for (const stream of [false, true]) {
    const called = [];
    calledBy[stream] = called;
    const runner = client.chat.completions.runTools(
        {...base, temperature: 0, stream, tool_choice: "required", parallel_tool_calls: false,
         tools: [zodFunction({
           name: "get_weather", parameters: WeatherArgs,
           function: (args) => {
             called.push(args);
             return {temperature: 21, unit: args.unit};
           },
         })]},
        {maxChatCompletions: 2});
    const final = await runner.finalChatCompletion();
    assert.equal(called.length, 2, `the function ran ${called.length} times`);
    called.forEach((args) => WeatherArgs.parse(args));
    const roles = runner.messages.map((m) => m.role);
    assert.deepEqual(roles, ["system", "user", "assistant", "tool", "assistant", "tool"]);
    assert.equal(final.choices[0].finish_reason, "tool_calls");
    assert.equal(runner.messages[3].tool_call_id, runner.messages[2].tool_calls[0].id);
    log(`ok runTools (stream ${stream}): ${JSON.stringify(called)}`);
  }
  // Greedy: the streamed runner sent back the same history, so its calls are the same.
  assert.deepEqual(calledBy[true], calledBy[false]);
}

runWithServer(binDir, modelsDir, main);
