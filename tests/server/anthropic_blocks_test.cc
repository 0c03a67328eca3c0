// MessageBlocks (server/anthropic/message_blocks.h): answer pieces -> Anthropic's content
// blocks, the stream's events and the whole content from the same builder.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "server/anthropic/message_blocks.h"

namespace textgen::server::anthropic {
namespace anthropic_blocks_test {

using json = nlohmann::ordered_json;
using Type = AssistantOutputEvent::Type;

AssistantOutputEvent Piece(Type type, std::string text = "", int index = -1, std::string id = "",
                           std::string name = "") {
  AssistantOutputEvent e;
  e.type = type;
  e.text = std::move(text);
  e.tool_index = index;
  e.id = std::move(id);
  e.name = std::move(name);
  return e;
}

// The content the events describe, assembled as a client does (tool inputs parsed at stop).
json Assemble(const std::vector<SseEvent>& events) {
  json content = json::array();
  std::string partial;
  for (const SseEvent& e : events) {
    if (e.name == "content_block_start") {
      REQUIRE(e.data.at("index") == content.size());
      content.push_back(e.data.at("content_block"));
      partial.clear();
    } else if (e.name == "content_block_delta") {
      REQUIRE(e.data.at("index") == content.size() - 1);
      const json& d = e.data.at("delta");
      json& b = content.back();
      if (d.at("type") == "text_delta")
        b["text"] = b["text"].get<std::string>() + d["text"].get<std::string>();
      if (d.at("type") == "thinking_delta") {
        b["thinking"] = b["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      }
      if (d.at("type") == "input_json_delta") partial += d["partial_json"].get<std::string>();
    } else {
      REQUIRE(e.name == "content_block_stop");
      REQUIRE(e.data.at("index") == content.size() - 1);
      if (content.back()["type"] == "tool_use") {
        json input = json::parse(partial, nullptr, false);
        content.back()["input"] = input.is_object() ? input : json::object();
      }
    }
  }
  return content;
}

TEST_CASE("blocks open in the order the pieces come, one at a time", "[server][anthropic]") {
  MessageBlocks blocks;
  std::vector<SseEvent> events;
  for (const AssistantOutputEvent& p :
       {Piece(Type::kReasoning, "Let me "), Piece(Type::kReasoning, "think."),
        Piece(Type::kContent, ""),  // empty: nothing
        Piece(Type::kContent, "Sure."), Piece(Type::kToolCallBegin, "", 0, "call_a", "f"),
        Piece(Type::kToolCallArguments, "{\"x\": ", 0), Piece(Type::kToolCallArguments, "1}", 0),
        Piece(Type::kToolCallEnd, "", 0), Piece(Type::kToolCallBegin, "", 1, "call_b", "g"),
        Piece(Type::kToolCallArguments, "{}", 1), Piece(Type::kToolCallEnd, "", 1),
        Piece(Type::kContent, "Done.")}) {
    blocks.Add(p, &events);
  }
  blocks.Close(&events);
  const json content = blocks.Content();
  CHECK(content == json::parse(R"([
      {"type": "thinking", "thinking": "Let me think.", "signature": ""},
      {"type": "text", "text": "Sure."},
      {"type": "tool_use", "id": "call_a", "name": "f", "input": {"x": 1}},
      {"type": "tool_use", "id": "call_b", "name": "g", "input": {}},
      {"type": "text", "text": "Done."}])"));
  CHECK(Assemble(events) == content);
  size_t starts = 0, stops = 0;
  for (const SseEvent& e : events) {
    starts += e.name == "content_block_start";
    stops += e.name == "content_block_stop";
  }
  CHECK(starts == 5);
  CHECK(stops == 5);
}

TEST_CASE("a call cut off keeps its streamed arguments, its whole input is {}",
          "[server][anthropic]") {
  MessageBlocks blocks;
  std::vector<SseEvent> events;
  blocks.Add(Piece(Type::kToolCallBegin, "", 0, "call_a", "f"), &events);
  blocks.Add(Piece(Type::kToolCallArguments, "{\"x\": [1, ", 0), &events);
  AssistantOutputEvent end = Piece(Type::kToolCallEnd, "", 0);
  end.complete = false;
  blocks.Add(end, &events);
  blocks.Close(&events);  // already closed: nothing more
  REQUIRE(events.size() == 3);
  CHECK(events[1].data["delta"]["partial_json"] == "{\"x\": [1, ");
  CHECK(events[2].name == "content_block_stop");
  CHECK(blocks.Content() ==
        json::parse(R"([{"type": "tool_use", "id": "call_a", "name": "f", "input": {}}])"));
}

TEST_CASE("an answer with nothing in it has no blocks", "[server][anthropic]") {
  MessageBlocks blocks;
  std::vector<SseEvent> events;
  blocks.Add(Piece(Type::kContent, ""), &events);
  blocks.Add(Piece(Type::kReasoning, ""), &events);
  blocks.Close(&events);
  CHECK(events.empty());
  CHECK(blocks.Content() == json::array());
}

}  // namespace anthropic_blocks_test
}  // namespace textgen::server::anthropic
