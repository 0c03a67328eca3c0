// LangChain JS (@langchain/openai's ChatOpenAI pointed at textgen-server by
// configuration.baseURL, unmodified) on a random-weight Qwen3-vocabulary model
// (qwen3_server.mjs): withStructuredOutput with a zod schema by its two schema-enforcing methods
// (a json_schema response_format, a forced function call), bindTools with tool_choice "required"
// plainly and streamed (LangChain reassembles the chunks), a tool round trip (the AIMessage with
// its tool calls and the ToolMessage sent back), parallel_tool_calls false, and reasoning_content
// before a structured answer. LangChain parses
// and validates every object and call itself; the test checks it did and re-validates with zod.
// Started by run_openai_sdk_test.sh; usage: node langchain_test.mjs BIN_DIR MODELS_DIR
import assert from "node:assert/strict";

import {AIMessageChunk, HumanMessage, SystemMessage} from "@langchain/core/messages";
import {tool} from "@langchain/core/tools";
import {ChatOpenAI} from "@langchain/openai";
import {z} from "zod";

import {assertNoMarkup, kNoThinking, log, runWithServer} from "./qwen3_server.mjs";

const [binDir, modelsDir] = process.argv.slice(2);

// Strings by pattern, not maxLength (see agents_test.mjs: zod counts UTF-16 units).
const Forecast = z.object({
  city: z.string().regex(/^[A-Za-z ]{1,12}$/),
  unit: z.enum(["celsius", "fahrenheit"]),
  days: z.number().int().min(1).max(7),
});

const WeatherArgs = z.object({
  city: z.string().regex(/^[A-Za-z ]{1,12}$/).describe("the city"),
  unit: z.enum(["celsius", "fahrenheit"]),
});
const TimeArgs = z.object({zone: z.enum(["UTC", "CET", "PST"])});
const Zone = z.object({zone: z.enum(["UTC", "CET", "PST"])});

const getWeather = tool(
    async ({city, unit}) => JSON.stringify({city, temperature: 21, unit}),
    {name: "get_weather", description: "Current weather in a city", schema: WeatherArgs});
const getTime = tool(async ({zone}) => `12:00 ${zone}`,
                     {name: "get_time", description: "The time in a zone", schema: TimeArgs});
const schemas = {get_weather: WeatherArgs, get_time: TimeArgs};

const conversation = [
  new SystemMessage("You are a weather assistant."),
  new HumanMessage("What is the weather in Paris, and what time is it there?"),
];

// The calls LangChain parsed: each valid under its tool's schema, none it could not parse.
function checkCalls(message, what) {
  assert.deepEqual(message.invalid_tool_calls ?? [], [], `${what}: invalid tool calls`);
  assert.ok(message.tool_calls.length >= 1, `${what}: no tool calls`);
  for (const call of message.tool_calls) {
    assert.match(call.id, /^call_/);
    assert.deepEqual(call.args, schemas[call.name].parse(call.args));
  }
  assertNoMarkup(typeof message.content === "string" ? message.content : "", `${what} content`);
}

async function main(server) {
  const model = (fields) => new ChatOpenAI({
    model: server.model, apiKey: "unused", configuration: {baseURL: server.baseURL},
    maxRetries: 0, maxTokens: 400, modelKwargs: {chat_template_kwargs: kNoThinking}, ...fields,
  });
  const greedy = model({temperature: 0});

  // Structured output, each method; LangChain parses the answer with the zod schema.
  for (const method of ["jsonSchema", "functionCalling"]) {
    for (const seed of [null, 1]) {
      const llm = seed === null ? greedy : model({temperature: 1, modelKwargs: {
        chat_template_kwargs: kNoThinking, seed}});
      const out = await llm.withStructuredOutput(Forecast, {method, name: "forecast"})
                      .invoke(conversation);
      assert.deepEqual(out, Forecast.parse(out));
      log(`ok withStructuredOutput ${method} (seed ${seed}): ${JSON.stringify(out)}`);
    }
  }
  // Reasoning (the template left to think, within reasoning_budget): LangChain keeps the block
  // in additional_kwargs.reasoning_content and parses the object after it. Some seeds only open
  // a block; one must.
  let reasoned = 0;
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const llm = model({temperature: 1, maxTokens: 200, modelKwargs: {seed, reasoning_budget: 4}});
    const {raw, parsed} = await llm.withStructuredOutput(Zone, {name: "zone", includeRaw: true})
                              .invoke(conversation);
    assert.deepEqual(parsed, Zone.parse(parsed));
    const reasoning = raw.additional_kwargs.reasoning_content;
    if (reasoning) {
      ++reasoned;
      assertNoMarkup(reasoning, "reasoning_content");
      assertNoMarkup(raw.content, "content");
    }
  }
  assert.ok(reasoned > 0, "no seed opened a reasoning block");
  log(`ok withStructuredOutput after reasoning (${reasoned} of 6 seeds reasoned)`);

  // Tool calls, forced: plain, and streamed chunks that LangChain reassembles.
  const withTools = greedy.bindTools([getWeather, getTime],
                                     {tool_choice: "required", parallel_tool_calls: false});
  const plain = await withTools.invoke(conversation);
  checkCalls(plain, "invoke");
  assert.equal(plain.tool_calls.length, 1);
  assert.equal(plain.response_metadata.finish_reason, "tool_calls");
  let streamed = null;
  let chunks = 0;
  for await (const chunk of await withTools.stream(conversation)) {
    assert.ok(chunk instanceof AIMessageChunk);
    streamed = streamed === null ? chunk : streamed.concat(chunk);
    ++chunks;
  }
  checkCalls(streamed, "stream");
  assert.ok(chunks > 3, `${chunks} chunks`);
  const strip = (m) => m.tool_calls.map((c) => ({name: c.name, args: c.args}));
  assert.deepEqual(strip(streamed), strip(plain));
  log(`ok bindTools, invoke = stream (${chunks} chunks): ${JSON.stringify(strip(plain))}`);

  // parallel_tool_calls false, sampled: exactly one call each time.
  for (const seed of [4, 5]) {
    const sampled = model({temperature: 1, modelKwargs: {chat_template_kwargs: kNoThinking, seed}})
                        .bindTools([getWeather, getTime],
                                   {tool_choice: "required", parallel_tool_calls: false});
    const m = await sampled.invoke(conversation);
    checkCalls(m, `seed ${seed}`);
    assert.equal(m.tool_calls.length, 1);
  }
  log("ok parallel_tool_calls false");

  // A round trip: the call, the tool's answer (a ToolMessage from the LangChain tool itself),
  // then the model again: once forced to call (the history renders and the call parses), once
  // with tool_choice "none" (text, no call).
  const weatherOnly = greedy.bindTools([getWeather], {tool_choice: "required",
                                                      parallel_tool_calls: false});
  const first = await weatherOnly.invoke(conversation);
  checkCalls(first, "round 1");
  const toolMessage = await getWeather.invoke(first.tool_calls[0]);
  assert.equal(toolMessage.tool_call_id, first.tool_calls[0].id);
  const history = [...conversation, first, toolMessage];
  const second = await weatherOnly.invoke(history);
  checkCalls(second, "round 2");
  const answer = await greedy.bindTools([getWeather], {tool_choice: "none"})
                     .withConfig({maxTokens: 16})
                     .invoke(history);
  assert.deepEqual(answer.tool_calls, []);
  assert.equal(typeof answer.content, "string");
  assert.ok(answer.content.length > 0);
  log(`ok tool round trip: ${JSON.stringify(second.tool_calls[0].args)}, then text`);
}

runWithServer(binDir, modelsDir, main);
