// GenerateRequest (the API) -> EngineRequest: proto defaults ("0 = off", unset optionals)
// become the engine's explicit values. Checks only what the engine cannot see (which prompt
// field was set, enum values, the server's max_new_tokens limit); the engine validates the
// rest and names the field in its errors.
#ifndef TEXTGEN_SERVER_REQUEST_CONVERT_H_
#define TEXTGEN_SERVER_REQUEST_CONVERT_H_

#include "absl/status/statusor.h"
#include "engine/scheduler/engine.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::server {

struct RequestLimits {
  // Used when the request leaves max_new_tokens at 0; such a request stops at the context
  // limit (CONTEXT_FULL) rather than being rejected for not fitting.
  int default_max_new_tokens = 256;
  // Largest max_new_tokens a client may ask for.
  int max_max_new_tokens = 4096;
};

// InvalidArgument naming the field for: both or neither of prompt / prompt_ids, unknown enum
// values, max_new_tokens above the limit.
absl::StatusOr<EngineRequest> ToEngineRequest(const v1::GenerateRequest& request,
                                              const RequestLimits& limits);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_REQUEST_CONVERT_H_
