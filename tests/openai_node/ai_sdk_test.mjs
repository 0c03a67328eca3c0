// The Vercel AI SDK (`ai` with @ai-sdk/openai-compatible pointed at textgen-server, unmodified)
// on a random-weight Qwen3-vocabulary model (qwen3_server.mjs): generateObject with a zod schema
// (json_schema response_format), generateText with tools and toolChoice "required", streamText
// with tools (the SDK reassembles the argument deltas), reasoning before an object, and a
// two-step agent loop that executes
// the tool and sends its result back; then OpenAI's own provider (@ai-sdk/openai, its Chat
// Completions model) for an object and a forced call. The SDK validates every object and tool input against the
// zod schemas itself (an invalid one is an error or an `invalid` call); the test checks none was.
// Started by run_openai_sdk_test.sh; usage: node ai_sdk_test.mjs BIN_DIR MODELS_DIR
import assert from "node:assert/strict";

import {createOpenAI} from "@ai-sdk/openai";
import {createOpenAICompatible} from "@ai-sdk/openai-compatible";
import {generateObject, generateText, stepCountIs, streamText, tool} from "ai";
import {z} from "zod";

import {assertNoMarkup, kNoThinking, log, runWithServer} from "./qwen3_server.mjs";

const [binDir, modelsDir] = process.argv.slice(2);

// Strings by pattern, not maxLength (see agents_test.mjs: zod counts UTF-16 units).
const Forecast = z.object({
  city: z.string().regex(/^[A-Za-z ]{1,12}$/),
  unit: z.enum(["celsius", "fahrenheit"]),
  days: z.number().int().min(1).max(7),
  alerts: z.array(z.enum(["wind", "rain", "heat"])).max(2),
});
const WeatherArgs = z.object({
  city: z.string().regex(/^[A-Za-z ]{1,12}$/),
  unit: z.enum(["celsius", "fahrenheit"]),
});
const TimeArgs = z.object({zone: z.enum(["UTC", "CET", "PST"])});
const Zone = z.object({zone: z.enum(["UTC", "CET", "PST"])});
const schemas = {get_weather: WeatherArgs, get_time: TimeArgs};

const messages = [{role: "user", content: "What is the weather in Paris, and what time is it there?"}];

// Tool calls the SDK accepted: none invalid, each input valid under its schema.
function checkCalls(calls, what) {
  assert.ok(calls.length >= 1, `${what}: no tool calls`);
  for (const call of calls) {
    assert.notEqual(call.invalid, true, `${what}: invalid call ${JSON.stringify(call)}`);
    assert.deepEqual(call.input, schemas[call.toolName].parse(call.input));
  }
}

async function main(server) {
  const textgen = createOpenAICompatible({
    name: "textgen", baseURL: server.baseURL, apiKey: "unused", includeUsage: true,
    // The server enforces json_schema response formats: without this the SDK sends json_object.
    supportsStructuredOutputs: true,
  });
  const common = {
    model: textgen.chatModel(server.model), system: "You are a weather assistant.", messages,
    maxRetries: 0, maxOutputTokens: 400,
    // Fields of the request body the SDK has no setting for.
    providerOptions: {textgen: {chat_template_kwargs: kNoThinking, parallel_tool_calls: false}},
  };
  const calledWith = [];
  const tools = {
    get_weather: tool({
      description: "Current weather in a city", inputSchema: WeatherArgs,
      execute: async (input) => {
        calledWith.push(input);
        return {temperature: 21, unit: input.unit};
      },
    }),
    get_time: tool({description: "The time in a zone", inputSchema: TimeArgs,
                    execute: async ({zone}) => `12:00 ${zone}`}),
  };

  // generateObject: the SDK parses and validates the object (it throws otherwise).
  for (const seed of [undefined, 1]) {
    const {object, finishReason} = await generateObject(
        {...common, schema: Forecast, schemaName: "forecast", temperature: seed ? 1 : 0, seed});
    assert.equal(finishReason, "stop");
    assert.deepEqual(object, Forecast.parse(object));
    log(`ok generateObject (seed ${seed}): ${JSON.stringify(object)}`);
  }

  // Reasoning (the template left to think, within reasoning_budget): the SDK reports the block
  // as reasoning and parses the object after it. Some seeds only open a block; one must.
  let reasoned = 0;
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const {object, reasoning} = await generateObject({
      ...common, schema: Zone, schemaName: "zone", temperature: 1, seed, maxOutputTokens: 200,
      providerOptions: {textgen: {reasoning_budget: 4}},
    });
    assert.deepEqual(object, Zone.parse(object));
    if (reasoning) {
      ++reasoned;
      assertNoMarkup(reasoning, "reasoning");
    }
  }
  assert.ok(reasoned > 0, "no seed opened a reasoning block");
  log(`ok generateObject after reasoning (${reasoned} of 6 seeds reasoned)`);

  // generateText with tools, forced, one step (no execution): the calls the SDK parsed.
  const generated = await generateText(
      {...common, tools, toolChoice: "required", temperature: 0, stopWhen: stepCountIs(1)});
  checkCalls(generated.toolCalls, "generateText");
  assert.equal(generated.toolCalls.length, 1);
  assert.equal(generated.finishReason, "tool-calls");
  assertNoMarkup(generated.text, "generateText text");
  log(`ok generateText: ${JSON.stringify(generated.toolCalls.map((c) => c.input))}`);

  // streamText, the same request: the argument deltas reassemble to the call, which equals the
  // generateText one.
  const stream = streamText(
      {...common, tools, toolChoice: "required", temperature: 0, stopWhen: stepCountIs(1)});
  const deltas = {};
  const streamedCalls = [];
  for await (const part of stream.fullStream) {
    if (part.type === "error") throw part.error;
    if (part.type === "tool-input-start") deltas[part.id] = "";
    if (part.type === "tool-input-delta") deltas[part.id] += part.delta;
    if (part.type === "tool-call") streamedCalls.push(part);
  }
  checkCalls(streamedCalls, "streamText");
  for (const call of streamedCalls) {
    assert.deepEqual(JSON.parse(deltas[call.toolCallId]), call.input);
  }
  const strip = (calls) => calls.map((c) => ({name: c.toolName, input: c.input}));
  assert.deepEqual(strip(streamedCalls), strip(generated.toolCalls));
  assert.ok(Object.values(deltas).every((d) => d.length > 0));
  assert.equal(await stream.finishReason, "tool-calls");
  log(`ok streamText = generateText (${Object.keys(deltas).length} call)`);

  // An agent loop of two steps: a forced call the SDK executes, then (tool_choice "none") an
  // answer written after the tool result, which the SDK sent back with the assistant's call.
  calledWith.length = 0;
  const agent = await generateText({
    ...common, tools, temperature: 0, stopWhen: stepCountIs(2),
    prepareStep: ({stepNumber}) =>
        (stepNumber === 0 ? {toolChoice: "required"} : {toolChoice: "none", maxOutputTokens: 16}),
  });
  assert.equal(agent.steps.length, 2);
  checkCalls(agent.steps[0].toolCalls, "agent step 1");
  assert.equal(agent.steps[0].toolResults.length, 1);
  assert.deepEqual(agent.steps[1].toolCalls, []);
  assert.ok(agent.text.length > 0);
  const weatherCalls = agent.steps[0].toolCalls.filter((c) => c.toolName === "get_weather");
  assert.deepEqual(calledWith, weatherCalls.map((c) => c.input));
  log(`ok two-step agent: ${JSON.stringify(agent.steps[0].toolCalls[0].input)}, then ` +
              `${agent.steps[1].usage.outputTokens} tokens of text`);

  // OpenAI's provider, Chat Completions: strict json_schema and tools (its default), the
  // parallel_tool_calls option. It has no way to send chat_template_kwargs, so the template may
  // think: the server's --reasoning-budget closes such a block and the constraint applies after.
  const openai = createOpenAI({baseURL: server.baseURL, apiKey: "unused"}).chat(server.model);
  const viaOpenAI = {model: openai, system: "You are a weather assistant.", messages,
                     maxRetries: 0, maxOutputTokens: 300,
                     providerOptions: {openai: {parallelToolCalls: false}}};
  for (const seed of [undefined, 2, 3]) {
    const {object} = await generateObject(
        {...viaOpenAI, schema: Forecast, schemaName: "forecast", temperature: seed ? 1 : 0, seed});
    assert.deepEqual(object, Forecast.parse(object));
    const called = await generateText({...viaOpenAI, tools, toolChoice: "required",
                                       temperature: seed ? 1 : 0, seed, stopWhen: stepCountIs(1)});
    checkCalls(called.toolCalls, "@ai-sdk/openai");
    assert.equal(called.toolCalls.length, 1);
    assert.equal(called.finishReason, "tool-calls");
    log(`ok @ai-sdk/openai (seed ${seed}): ${JSON.stringify(object)}, ` +
        `${JSON.stringify(called.toolCalls[0].input)}`);
  }
}

runWithServer(binDir, modelsDir, main, ["--reasoning-budget", "8"]);
