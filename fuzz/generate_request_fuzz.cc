// A GenerateRequest from arbitrary protobuf bytes (what a gRPC client can send) -> the engine's
// request, then the engine's own checks of its decoding options.
#include <cstdint>

#include "engine/decoding/decoding_options.h"
#include "google/protobuf/stubs/logging.h"
#include "server/request_convert.h"
#include "textgen/v1/textgen.pb.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // Invalid UTF-8 in a string field is logged by the parser: noise, not a finding.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace textgen;
  v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  const server::RequestLimits limits;
  auto converted = server::ToEngineRequest(request, limits);
  if (!converted.ok()) return 0;
  const int prompt_tokens = converted->prompt_text.has_value()
                                ? static_cast<int>(converted->prompt_text->size())
                                : static_cast<int>(converted->prompt_ids.size());
  (void)ValidateDecodingOptions(converted->decoding, /*n_ctx=*/2048, prompt_tokens);
  return 0;
}
