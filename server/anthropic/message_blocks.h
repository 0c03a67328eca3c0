// One answer as Anthropic's content blocks, built from the pipeline's answer pieces
// (AnswerStream's events) in the order they come: a thinking block, text, each tool_use. The
// same builder makes the stream's block events and the whole message's content, so that the
// concatenated deltas equal the non-streamed content:
//   thinking -> {"type": "thinking", "thinking", "signature": ""} (thinking_delta); no signature
//               is made (nothing here can check one);
//   content  -> {"type": "text", "text"} (text_delta);
//   a call   -> {"type": "tool_use", "id", "name", "input"} (input_json_delta with the
//               arguments' JSON text as it streams; the whole message's input is the parsed
//               object). The id is the pipeline's ("call_" + 24 alphanumerics, or the model's
//               own for the Mistral formats, whose templates need it back verbatim).
// A piece of another kind than the open block's closes it and opens the next (index + 1). A
// call cut off by max_tokens (incomplete arguments) keeps its streamed partial_json; the whole
// message's input is then {} (its text is no object).
#ifndef TEXTGEN_SERVER_ANTHROPIC_MESSAGE_BLOCKS_H_
#define TEXTGEN_SERVER_ANTHROPIC_MESSAGE_BLOCKS_H_

#include <string>
#include <vector>

#include "engine/chat/assistant_message.h"
#include "nlohmann/json.hpp"

namespace textgen::server::anthropic {

// One server-sent event: "event: <name>\ndata: <data>\n\n".
struct SseEvent {
  std::string name;
  nlohmann::ordered_json data;
};

// Not thread-safe; one per answer.
class MessageBlocks {
 public:
  // Applies one answer piece, appending the stream events it makes (content_block_start,
  // content_block_delta, content_block_stop). Empty text pieces make nothing.
  void Add(const AssistantOutputEvent& event, std::vector<SseEvent>* out);
  // Closes the open block, if any (content_block_stop). Call at the answer's end.
  void Close(std::vector<SseEvent>* out);

  // The whole message's content array, in block order.
  nlohmann::ordered_json Content() const;
  size_t size() const { return blocks_.size(); }

 private:
  enum class Kind { kThinking, kText, kToolUse };
  struct Block {
    Kind kind = Kind::kText;
    std::string text;  // thinking, text, or the tool call's arguments JSON text
    std::string id;
    std::string name;
  };

  // Opens a block of `kind` unless one is open already (closing another kind first).
  Block& Open(Kind kind, std::vector<SseEvent>* out, const AssistantOutputEvent& event);
  // The block as content_block_start shows it (empty text, input {}).
  nlohmann::ordered_json StartJson(const Block& block) const;

  std::vector<Block> blocks_;
  bool open_ = false;  // blocks_.back() takes more pieces
};

}  // namespace textgen::server::anthropic

#endif  // TEXTGEN_SERVER_ANTHROPIC_MESSAGE_BLOCKS_H_
