// `textgen-run --render`: prints a chat template's rendering of a conversation, for tests and
// for users debugging a template.
#ifndef TEXTGEN_CLIENT_RUN_RENDER_CHAT_H_
#define TEXTGEN_CLIENT_RUN_RENDER_CHAT_H_

#include <optional>
#include <string>

namespace textgen {

struct RenderChatArgs {
  bool render = false;
  std::string template_path;  // --chat-template
  std::string model_path;     // --model (its template and special tokens)
  std::string messages_path;  // --messages
  std::string tools_path;     // --tools
  bool add_generation_prompt = false;
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::string kwargs_json;  // --template-kwargs
};

// Prints exactly the rendered text to stdout and returns 0; prints the error to stderr and
// returns 2 when the arguments, the files or the template fail.
int RenderChatMain(const RenderChatArgs& args);

}  // namespace textgen

#endif  // TEXTGEN_CLIENT_RUN_RENDER_CHAT_H_
