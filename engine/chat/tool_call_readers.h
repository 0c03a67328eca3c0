// Readers of one tool-call block (the text after a block's opening marker, such as
// "<tool_call>" or "[TOOL_CALLS]"), byte by byte, for AssistantOutputParser. A reader reports
// calls to a CallSink as soon as each part is certain: a call begins once its name is complete
// (and accepted) and its arguments have started, and the arguments stream byte by byte after
// that, always a prefix of valid JSON. Internal to engine/chat.
#ifndef TEXTGEN_ENGINE_CHAT_TOOL_CALL_READERS_H_
#define TEXTGEN_ENGINE_CHAT_TOOL_CALL_READERS_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/json_stream.h"
#include "engine/chat/tool_spec.h"

namespace textgen {

class CallSink {
 public:
  virtual ~CallSink() = default;
  // A call's name is known and its arguments start. False: the name is not an offered tool
  // (the reader then fails).
  virtual bool BeginCall(const std::string& name, const std::string& id) = 0;
  virtual void Arguments(std::string_view fragment) = 0;
  // complete: the arguments are a whole JSON value.
  virtual void EndCall(bool complete) = 0;
  // Plain answer text found inside a block (kGenericJson's {"response": "..."}).
  virtual void Content(std::string_view text) = 0;
};

class BlockReader {
 public:
  enum class Step {
    kContinue,   // the byte is part of the block
    kEnd,        // the byte ended the block
    kEndBefore,  // the block had ended before the byte, which is not part of it
    kError,      // the byte cannot be part of the block; not consumed
  };
  virtual ~BlockReader() = default;
  virtual Step Push(char c, CallSink& sink) = 0;
  // The answer ended inside the block. Readers that can only decide at the end (Llama's
  // <|python_tag|> code) report their call here; true if they did.
  virtual bool Finish(CallSink& sink) { return false; }
};

// The JSON shapes of a call object.
struct JsonCallShape {
  // Keys holding the arguments object ("arguments"; Llama 3.x writes "parameters").
  std::vector<std::string> argument_keys = {"arguments", "parameters"};
  // Begin the call only once the object closes, so that an "id" written after the arguments
  // (Mistral v3) is known; the arguments then arrive in one piece.
  bool wait_for_close = false;
};

// {"name": "f", "arguments": {...}, "id"?: "...", "type"?: "function"}, also nested as
// {"type": "function", "function": {...}}; or a JSON array of such objects when `allow_list`.
std::unique_ptr<BlockReader> MakeJsonCallReader(JsonCallShape shape, bool allow_list);

// kGenericJson's answer: {"tool_calls": [call, ...]}, {"tool_call": call} or
// {"response": "text"} (the text goes to CallSink::Content as it decodes).
std::unique_ptr<BlockReader> MakeGenericJsonReader();

// Qwen3-Coder's body after "<tool_call>": <function=f> <parameter=x>value</parameter>...
// </function>, ending at "</tool_call>". Each value becomes a JSON member: a JSON string for
// parameters whose schema type is "string" (or that do not parse as JSON), else the value's
// JSON text. `tools` gives the schemas; it must outlive the reader.
std::unique_ptr<BlockReader> MakeQwenXmlReader(const std::vector<ToolSpec>* tools);

// Whether a Qwen3-Coder parameter's value is text (its schema's type is or includes
// "string"): written raw between the tags and turned into a JSON string. Other values are
// JSON. `tool` may be null (an unknown tool: JSON).
bool XmlParameterIsText(const ToolSpec* tool, const std::string& parameter);

// Mistral's body after "[TOOL_CALLS]": f[ARGS]{...} or f[CALL_ID]id[ARGS]{...}.
std::unique_ptr<BlockReader> MakeMistralArgsReader();

// Llama 3.1's body after "<|python_tag|>": a JSON call object, or `tool.call(k="v", ...)` for a
// built-in tool, or code for a tool named "python" / "ipython" / "code_interpreter" (the two
// last kinds decided at the end of the answer). `tools` must outlive the reader.
std::unique_ptr<BlockReader> MakePythonTagReader(const std::vector<ToolSpec>* tools);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_CHAT_TOOL_CALL_READERS_H_
