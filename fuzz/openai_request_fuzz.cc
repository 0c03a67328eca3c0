// An OpenAI-compatible HTTP request body of arbitrary bytes -> CompletionRequest, then the
// engine's checks of the decoding options each choice would run with. Byte 0 picks the
// endpoint (bit 0: /v1/chat/completions, else /v1/completions); the rest is the body.
#include <cstdint>
#include <string_view>

#include "engine/decoding/decoding_options.h"
#include "server/openai/completion_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace textgen::server;
  if (size == 0) return 0;
  const openai::Endpoint endpoint =
      (data[0] & 1) != 0 ? openai::Endpoint::kChat : openai::Endpoint::kCompletions;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const RequestLimits limits;
  auto request = openai::ParseCompletionRequest(endpoint, body, limits);
  if (!request.ok()) return 0;
  const int prompt_tokens = request->prompt_text.has_value()
                                ? static_cast<int>(request->prompt_text->size())
                                : static_cast<int>(request->prompt_ids.size());
  (void)textgen::ValidateDecodingOptions(request->decoding, /*n_ctx=*/2048, prompt_tokens);
  (void)request->chat.messages.dump();
  return 0;
}
