// The server the tool-call and structured-output tests drive: a random-weight model with Qwen3's
// vocabulary (written at test time by textgen-synth-model), served with Qwen3's chat template
// (Hermes-style <tool_call> calls, <think> reasoning). A noise model never writes valid JSON or
// calls a tool on its own, so whatever valid output comes back was made so by the server's
// constraint, and whatever the client accepts was accepted on the wire format alone.
import assert from "node:assert/strict";
import {execFileSync, spawn} from "node:child_process";
import {mkdtempSync, rmSync} from "node:fs";
import {tmpdir} from "node:os";
import {join} from "node:path";

export const kModelName = "qwen3-noise.gguf";

// Writes the model into a fresh temporary directory; returns its path.
function synthModel(binDir, modelsDir, dir) {
  const out = join(dir, kModelName);
  execFileSync(`${binDir}/textgen-synth-model`, [
    "--shape", "custom", "--arch", "qwen3", "--dim", "64", "--layers", "2", "--heads", "4",
    "--kv-heads", "2", "--head-dim", "32", "--ffn", "128", "--ctx", "2048", "--type", "f32",
    "--vocab", `${modelsDir}/vocab/ggml-vocab-qwen3.gguf`, "--out", out,
  ], {stdio: ["ignore", "pipe", "pipe"]});
  return out;
}

// Polls GET /v1/models until it answers 200: the HTTP API answers 503 until the chat template
// and its tool-call grammar machinery are set up, which is after the "serving" log line.
async function waitForModel(baseURL, log) {
  const deadline = Date.now() + 60000;
  for (;;) {
    const res = await fetch(`${baseURL}/models`).catch(() => null);
    if (res !== null && res.status === 200) return;
    if (Date.now() > deadline) throw new Error(`the model never became ready:\n${log()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// Starts textgen-server on free ports and resolves once it serves: {baseURL, model, grpcPort,
// stop()}. stop() ends the server and removes the model. `extraArgs`: more flags for the server.
export async function startQwen3Server(binDir, modelsDir, extraArgs = []) {
  const dir = mkdtempSync(join(tmpdir(), "textgen-node-"));
  const model = synthModel(binDir, modelsDir, dir);
  const server = spawn(`${binDir}/textgen-server`, [
    "--model", model, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
    "--chat-template", `${modelsDir}/../chat-templates/templates/Qwen-Qwen3-0.6B.jinja`,
    // The default pool (1 GiB, committed at start) takes seconds to fault in on a busy machine.
    "--kv-cache-mib", "64",
    // The tests compare a request's plain and streamed answers, and the prefix cache serves the
    // second from the first's blocks: exact only with batch-invariant matmuls (auto turns them
    // on only at the AVX-512 levels; docs/kernels.md: Batch invariance).
    "--batch-invariant", "on",
    ...extraArgs,
  ], {stdio: ["ignore", "pipe", "pipe"]});
  let log = "";
  const stop = () => {
    server.kill("SIGTERM");
    rmSync(dir, {recursive: true, force: true});
  };
  try {
    const ports = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 60000);
      const onData = (data) => {
        log += data;
        const http = log.match(/chat page on \S+ \(port (\d+)/);
        const grpc = log.match(/serving textgen\.v1\.TextGeneration on \S+ \(port (\d+)\)/);
        if (http && grpc) {
          clearTimeout(timer);
          resolve({httpPort: Number(http[1]), grpcPort: Number(grpc[1])});
        }
      };
      server.stdout.on("data", onData);
      server.stderr.on("data", onData);
      server.on("exit", (code) => reject(new Error(`server exited (${code}):\n${log}`)));
    });
    const baseURL = `http://127.0.0.1:${ports.httpPort}/v1`;
    await waitForModel(baseURL, () => log);
    return {baseURL, model: kModelName, grpcPort: ports.grpcPort, stop, log: () => log};
  } catch (e) {
    stop();
    throw e;
  }
}

const startTime = Date.now();

// console.log with the seconds since the script started, so that a slow step shows in the log.
export function log(message) {
  console.log(`[${((Date.now() - startTime) / 1000).toFixed(1)} s] ${message}`);
}

// Runs `body(server)` against a fresh server; exits 0 when it resolves, 1 (after printing the
// error) when it throws. `extraArgs`: more flags for the server.
export async function runWithServer(binDir, modelsDir, body, extraArgs = []) {
  let server = null;
  let failed = false;
  try {
    server = await startQwen3Server(binDir, modelsDir, extraArgs);
    log("server up");
    await body(server);
  } catch (e) {
    console.error(e);
    failed = true;
  } finally {
    if (server) server.stop();
  }
  log(failed ? "FAILED" : "passed");
  process.exit(failed ? 1 : 0);
}

// The chat_template_kwargs that keep Qwen3's template from opening a reasoning block (a noise
// model would fill it until max_tokens).
export const kNoThinking = {enable_thinking: false};

// Asserts that `text` holds none of the template's markup (tool-call tags, reasoning tags,
// ChatML control tokens).
export function assertNoMarkup(text, what) {
  for (const tag of ["<tool_call>", "</tool_call>", "<think>", "</think>", "<|im_end|>",
                     "<|im_start|>"]) {
    assert.ok(!(text ?? "").includes(tag), `${what} holds ${tag}: ${JSON.stringify(text)}`);
  }
}
