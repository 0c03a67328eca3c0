// An Anthropic Messages request body of arbitrary bytes -> MessagesRequest, then the engine's
// checks of its decoding options. Byte 0 picks the route (bit 0: /v1/messages/count_tokens,
// else /v1/messages); the rest is the body.
#include <cstdint>
#include <string_view>

#include "engine/decoding/decoding_options.h"
#include "server/anthropic/messages_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace textgen::server;
  if (size == 0) return 0;
  const anthropic::MessagesRoute route = (data[0] & 1) != 0 ? anthropic::MessagesRoute::kCountTokens
                                                            : anthropic::MessagesRoute::kCreate;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const RequestLimits limits;
  auto request = anthropic::ParseMessagesRequest(route, body, limits);
  if (!request.ok()) {
    (void)anthropic::ToAnthropicNames(request.status());
    return 0;
  }
  (void)textgen::ValidateDecodingOptions(request->decoding, /*n_ctx=*/2048, /*prompt_tokens=*/1);
  (void)request->chat.messages.dump();
  return 0;
}
