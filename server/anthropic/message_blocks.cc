#include "server/anthropic/message_blocks.h"

namespace textgen::server::anthropic {
namespace {

using json = nlohmann::ordered_json;
using Type = AssistantOutputEvent::Type;

SseEvent Stop(size_t index) {
  return {"content_block_stop", json{{"type", "content_block_stop"}, {"index", index}}};
}

SseEvent Delta(size_t index, json delta) {
  return {"content_block_delta",
          json{{"type", "content_block_delta"}, {"index", index}, {"delta", std::move(delta)}}};
}

}  // namespace

json MessageBlocks::StartJson(const Block& block) const {
  switch (block.kind) {
    case Kind::kThinking:
      return {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
    case Kind::kText:
      return {{"type", "text"}, {"text", ""}};
    case Kind::kToolUse:
      return {
          {"type", "tool_use"}, {"id", block.id}, {"name", block.name}, {"input", json::object()}};
  }
  return {};
}

MessageBlocks::Block& MessageBlocks::Open(Kind kind, std::vector<SseEvent>* out,
                                          const AssistantOutputEvent& event) {
  // A call always starts a block of its own; text and thinking extend an open one of theirs.
  if (open_ && blocks_.back().kind == kind && kind != Kind::kToolUse) return blocks_.back();
  Close(out);
  Block block;
  block.kind = kind;
  block.id = event.id;
  block.name = event.name;
  blocks_.push_back(std::move(block));
  open_ = true;
  const size_t index = blocks_.size() - 1;
  out->push_back({"content_block_start", json{{"type", "content_block_start"},
                                              {"index", index},
                                              {"content_block", StartJson(blocks_.back())}}});
  return blocks_.back();
}

void MessageBlocks::Add(const AssistantOutputEvent& event, std::vector<SseEvent>* out) {
  switch (event.type) {
    case Type::kReasoning: {
      if (event.text.empty()) return;
      Block& b = Open(Kind::kThinking, out, event);
      b.text += event.text;
      out->push_back(
          Delta(blocks_.size() - 1, json{{"type", "thinking_delta"}, {"thinking", event.text}}));
      return;
    }
    case Type::kContent: {
      if (event.text.empty()) return;
      Block& b = Open(Kind::kText, out, event);
      b.text += event.text;
      out->push_back(Delta(blocks_.size() - 1, json{{"type", "text_delta"}, {"text", event.text}}));
      return;
    }
    case Type::kToolCallBegin:
      Open(Kind::kToolUse, out, event);
      return;
    case Type::kToolCallArguments: {
      if (event.text.empty() || !open_ || blocks_.back().kind != Kind::kToolUse) return;
      blocks_.back().text += event.text;
      out->push_back(Delta(blocks_.size() - 1,
                           json{{"type", "input_json_delta"}, {"partial_json", event.text}}));
      return;
    }
    case Type::kToolCallEnd:
      if (open_ && blocks_.back().kind == Kind::kToolUse) Close(out);
      return;
  }
}

void MessageBlocks::Close(std::vector<SseEvent>* out) {
  if (!open_) return;
  open_ = false;
  out->push_back(Stop(blocks_.size() - 1));
}

json MessageBlocks::Content() const {
  json content = json::array();
  for (const Block& b : blocks_) {
    json j = StartJson(b);
    switch (b.kind) {
      case Kind::kThinking:
        j["thinking"] = b.text;
        break;
      case Kind::kText:
        j["text"] = b.text;
        break;
      case Kind::kToolUse: {
        // Complete arguments are one JSON object (the parser's guarantee); a cut-off call's
        // are a prefix, left as {}.
        json input = json::parse(b.text, nullptr, /*allow_exceptions=*/false);
        j["input"] = input.is_object() ? std::move(input) : json::object();
        break;
      }
    }
    content.push_back(std::move(j));
  }
  return content;
}

}  // namespace textgen::server::anthropic
