// Helpers for the end-to-end tests of the Anthropic Messages API (header-only, like
// openai_test_util.h): the error shape, a strict reader of Anthropic's event streams that
// reassembles the message as the SDK does, and a random-weight model with Qwen3's vocabulary.
#ifndef TEXTGEN_TESTS_SERVER_ANTHROPIC_TEST_UTIL_H_
#define TEXTGEN_TESTS_SERVER_ANTHROPIC_TEST_UTIL_H_

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/server/openai_test_util.h"

namespace textgen::testing {

inline constexpr char kMessagesPath[] = "/v1/messages";
inline constexpr char kCountTokensPath[] = "/v1/messages/count_tokens";

// Anthropic's error body {"type": "error", "error": {"type", "message"}}, checked; the inner
// error object.
inline Json AnthropicErrorOf(const HttpReply& r) {
  INFO(r.body);
  REQUIRE(r.json.is_object());
  REQUIRE(r.json.at("type") == "error");
  const Json& e = r.json.at("error");
  REQUIRE(e.at("type").is_string());
  REQUIRE(e.at("message").is_string());
  REQUIRE(e.size() == 2);
  return e;
}

struct SseEvent {
  std::string name;
  Json data;
};

// "event: NAME\ndata: JSON\n\n" events, each data's "type" equal to its name. FAILs the test
// on anything else.
inline std::vector<SseEvent> ParseAnthropicSse(const std::string& body) {
  std::vector<SseEvent> events;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    REQUIRE(end != std::string::npos);
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    INFO(event);
    REQUIRE(event.rfind("event: ", 0) == 0);
    const size_t newline = event.find('\n');
    REQUIRE(newline != std::string::npos);
    REQUIRE(event.compare(newline + 1, 6, "data: ") == 0);
    REQUIRE(event.find('\n', newline + 1) == std::string::npos);
    SseEvent e{event.substr(7, newline - 7),
               Json::parse(event.substr(newline + 7), nullptr, false)};
    REQUIRE_FALSE(e.data.is_discarded());
    REQUIRE(e.data.at("type") == e.name);
    events.push_back(std::move(e));
  }
  return events;
}

// The message a stream describes, as the SDK assembles it, checking the order on the way:
// message_start (empty content, no stop reason), then per block start / deltas of the block's
// kind / stop with indices 0, 1, ... one block open at a time, then message_delta and
// message_stop last. Tool inputs are the parsed partial_json.
inline Json ReassembleMessage(const std::vector<SseEvent>& events) {
  REQUIRE(events.size() >= 3);
  REQUIRE(events.front().name == "message_start");
  Json m = events.front().data.at("message");
  REQUIRE(m.at("content") == Json::array());
  REQUIRE(m.at("stop_reason").is_null());
  bool open = false;
  std::string partial_json;
  for (size_t i = 1; i + 2 < events.size(); ++i) {
    const SseEvent& e = events[i];
    INFO("event " << i << ": " << e.name << " " << e.data.dump());
    Json& content = m["content"];
    if (e.name == "content_block_start") {
      REQUIRE_FALSE(open);
      REQUIRE(e.data.at("index") == content.size());
      content.push_back(e.data.at("content_block"));
      open = true;
      partial_json.clear();
      continue;
    }
    REQUIRE(open);
    REQUIRE(e.data.at("index") == content.size() - 1);
    Json& block = content.back();
    if (e.name == "content_block_stop") {
      if (block.at("type") == "tool_use") {
        block["input"] = Json::parse(partial_json.empty() ? "{}" : partial_json, nullptr, false);
      }
      open = false;
      continue;
    }
    REQUIRE(e.name == "content_block_delta");
    const Json& d = e.data.at("delta");
    if (d.at("type") == "text_delta") {
      REQUIRE(block.at("type") == "text");
      block["text"] = block.at("text").get<std::string>() + d.at("text").get<std::string>();
    } else if (d.at("type") == "thinking_delta") {
      REQUIRE(block.at("type") == "thinking");
      block["thinking"] =
          block.at("thinking").get<std::string>() + d.at("thinking").get<std::string>();
    } else {
      REQUIRE(d.at("type") == "input_json_delta");
      REQUIRE(block.at("type") == "tool_use");
      partial_json += d.at("partial_json").get<std::string>();
    }
  }
  REQUIRE_FALSE(open);
  const SseEvent& delta = events[events.size() - 2];
  REQUIRE(delta.name == "message_delta");
  m["stop_reason"] = delta.data.at("delta").at("stop_reason");
  m["stop_sequence"] = delta.data.at("delta").at("stop_sequence");
  m["usage"].update(delta.data.at("usage"));
  REQUIRE(events.back().name == "message_stop");
  return m;
}

// A random-weight Qwen3-shaped model with Qwen3's vocabulary (its special tokens: <think>,
// <tool_call>, <|im_end|>), written once per test process; served as "anthropic-qwen3.gguf".
inline std::string Qwen3VocabModel() {
  static const std::string path = [] {
    const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
    REQUIRE(bin_dir != nullptr);
    const std::string out = ScratchDir() + "/anthropic-qwen3.gguf";
    CommandResult synth =
        RunCommand(std::string(bin_dir) +
                   "/textgen-synth-model --shape custom --arch qwen3 --dim 64 --layers 2 --heads 4 "
                   "--kv-heads 2 --head-dim 32 --ffn 128 --ctx 2048 --type f32 --vocab " +
                   ShellQuote(ModelPath("vocab/ggml-vocab-qwen3.gguf")) + " --out " +
                   ShellQuote(out) + " 2>&1");
    INFO(synth.out);
    REQUIRE(synth.exit_code == 0);
    return out;
  }();
  return path;
}

inline std::string TemplatePath(const std::string& name) {
  return ChatTemplatesDir() + "/templates/" + name + ".jinja";
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_SERVER_ANTHROPIC_TEST_UTIL_H_
