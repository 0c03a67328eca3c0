// GenerateRequest (the API) -> EngineRequest: proto defaults ("0 = off", unset optionals)
// become the engine's explicit values. Checks only what the engine cannot see (which prompt
// field was set, enum values, the server's max_new_tokens limit); the engine validates the
// rest and names the field in its errors.
#ifndef TEXTGEN_SERVER_REQUEST_CONVERT_H_
#define TEXTGEN_SERVER_REQUEST_CONVERT_H_

#include "absl/status/statusor.h"
#include "engine/decoding/speculation_options.h"
#include "engine/scheduler/engine.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::server {

struct RequestLimits {
  // Used when the request leaves max_new_tokens at 0; such a request stops at the context
  // limit (CONTEXT_FULL) rather than being rejected for not fitting.
  int default_max_new_tokens = 256;
  // Largest max_new_tokens a client may ask for.
  int max_max_new_tokens = 4096;
  // Most bytes of text in one request's prompt (Generate's prompt, a chat's message contents,
  // Tokenize's text, the HTTP API's prompt or messages): checked before any tokenizing, so
  // that no request can make the server tokenize megabytes it will refuse anyway.
  size_t max_prompt_bytes = 1 << 20;
  // Speculative decoding of requests that do not ask (the server's --speculative and
  // --speculative-tokens); its prediction is always empty.
  SpeculationOptions speculation;
  // The draft source of a request that asks for speculation when `speculation` has none: the
  // draft model when the server has one, else n-gram lookup.
  DraftSource asked_draft_source = DraftSource::kNgram;
};

// InvalidArgument naming `field` when `bytes` is over limits.max_prompt_bytes.
absl::Status CheckPromptBytes(const char* field, size_t bytes, const RequestLimits& limits);

// The decoding fields, which GenerateRequest and ChatRequest share by name and meaning (`Req`
// is one of the two). The method is resolved first (unset: BEAM if a beam field is set, else
// SAMPLE if a sampling field is, else GREEDY); InvalidArgument naming the field for a field of
// another method, top_logprobs with BEAM, n_keep without SLIDE, unknown enum values,
// max_new_tokens above the limit. SAMPLE without a temperature samples at 1.0.
// The request's `prediction` (Predicted Outputs) into out->prediction_text, within the prompt
// byte limit (InvalidArgument naming it). `Req` is GenerateRequest or ChatRequest.
template <typename Req>
absl::Status ApplyPrediction(const Req& request, const RequestLimits& limits, EngineRequest* out);

template <typename Req>
absl::StatusOr<DecodingOptions> ToDecodingOptions(const Req& request, const RequestLimits& limits);

// OK for "" (no session) and for 32 lowercase hex characters (the only form sessions have);
// otherwise InvalidArgument that does not repeat the id (it may be megabytes, or forge log lines).
absl::Status CheckSessionId(const std::string& session_id);

// CheckSessionId for a session a client wants created under its own id: the id must also look
// random (at least kMinDistinctSessionIdDigits different hex digits; 128 random bits have fewer
// with a probability near 1e-8), so that ids like 000...0 cannot be taken or guessed.
absl::Status CheckChosenSessionId(const std::string& session_id);
inline constexpr int kMinDistinctSessionIdDigits = 8;

// ToDecodingOptions, CheckSessionId, and InvalidArgument for both or neither of prompt /
// prompt_ids, for add_bos with prompt_ids and for a prompt over limits.max_prompt_bytes.
absl::StatusOr<EngineRequest> ToEngineRequest(const v1::GenerateRequest& request,
                                              const RequestLimits& limits);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_REQUEST_CONVERT_H_
