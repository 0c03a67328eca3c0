#include "server/request_convert.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"

namespace textgen::server {
namespace {

// Proto3 enums are open: a newer client can send a value this server does not know.
absl::StatusOr<DecodingMethod> ToMethod(v1::DecodingMethod m) {
  switch (m) {
    case v1::GREEDY:
      return DecodingMethod::kGreedy;
    case v1::SAMPLE:
      return DecodingMethod::kSample;
    case v1::BEAM:
      return DecodingMethod::kBeam;
    default:
      return absl::InvalidArgumentError(absl::StrCat("method: unknown value ", m));
  }
}

absl::StatusOr<EarlyStopping> ToEarlyStopping(v1::EarlyStopping e) {
  switch (e) {
    case v1::HEURISTIC:
      return EarlyStopping::kHeuristic;
    case v1::EARLY:
      return EarlyStopping::kEarly;
    case v1::NEVER:
      return EarlyStopping::kNever;
    default:
      return absl::InvalidArgumentError(absl::StrCat("early_stopping: unknown value ", e));
  }
}

absl::StatusOr<ContextOverflow> ToContextOverflow(v1::ContextOverflow c) {
  switch (c) {
    case v1::CONTEXT_OVERFLOW_ERROR:
      return ContextOverflow::kError;
    case v1::CONTEXT_OVERFLOW_SLIDE:
      return ContextOverflow::kSlide;
    default:
      return absl::InvalidArgumentError(absl::StrCat("context_overflow: unknown value ", c));
  }
}

// uint32 fields checked against int before narrowing, so 2^31 and above cannot wrap negative
// and slip past the engine's range checks.
int ClampToInt(uint32_t v) { return v > 0x7fffffffu ? 0x7fffffff : static_cast<int>(v); }

const char* MethodName(DecodingMethod m) {
  switch (m) {
    case DecodingMethod::kGreedy:
      return "GREEDY";
    case DecodingMethod::kSample:
      return "SAMPLE";
    case DecodingMethod::kBeam:
      return "BEAM";
  }
  return "?";
}

// The first field of a method that the request sets, or nullptr. Values that mean "default"
// (0, unset, num_beams 1, early_stopping HEURISTIC) count as not set.
template <typename Req>
const char* FirstSamplingField(const Req& r) {
  if (r.temperature() != 0.0f) return "temperature";
  if (r.top_k() != 0) return "top_k";
  if (r.top_p() != 0.0f) return "top_p";
  if (r.min_p() != 0.0f) return "min_p";
  if (r.has_seed()) return "seed";
  return nullptr;
}

template <typename Req>
const char* FirstBeamField(const Req& r) {
  if (r.num_beams() > 1) return "num_beams";
  if (r.has_length_penalty()) return "length_penalty";
  if (r.early_stopping() != v1::HEURISTIC) return "early_stopping";
  if (r.num_return_sequences() > 1) return "num_return_sequences";
  return nullptr;
}

// The method asked for, or the one the fields imply when it is unset; then every field that
// belongs to another method is refused, so that none is silently ignored.
template <typename Req>
absl::StatusOr<DecodingMethod> ResolveMethod(const Req& r) {
  const char* sampling = FirstSamplingField(r);
  const char* beam = FirstBeamField(r);
  DecodingMethod m = DecodingMethod::kGreedy;
  std::string why;  // how an unset method was chosen, for the error messages
  if (r.has_method()) {
    auto method = ToMethod(r.method());
    if (!method.ok()) return method.status();
    m = *method;
  } else if (beam != nullptr) {
    m = DecodingMethod::kBeam;
    why = absl::StrCat(" (method unset; ", beam, " asks for BEAM)");
  } else if (sampling != nullptr) {
    m = DecodingMethod::kSample;
  }
  if (m != DecodingMethod::kSample && sampling != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(sampling, " applies only to method SAMPLE; ",
                                                   "this request's method is ", MethodName(m),
                                                   why));
  }
  if (m != DecodingMethod::kBeam && beam != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        beam, " applies only to method BEAM; this request's method is ", MethodName(m)));
  }
  if (m == DecodingMethod::kBeam && r.top_logprobs() != 0) {
    return absl::InvalidArgumentError(
        "top_logprobs is not supported with method BEAM (GREEDY and SAMPLE only)");
  }
  return m;
}

}  // namespace

absl::Status CheckPromptBytes(const char* field, size_t bytes, const RequestLimits& limits) {
  if (bytes <= limits.max_prompt_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", bytes,
                                                 " bytes of text, over the server's limit of ",
                                                 limits.max_prompt_bytes, " bytes"));
}

template <typename Req>
absl::StatusOr<DecodingOptions> ToDecodingOptions(const Req& request, const RequestLimits& limits) {
  DecodingOptions d;
  auto method = ResolveMethod(request);
  if (!method.ok()) return method.status();
  d.method = *method;

  if (request.max_new_tokens() == 0) {
    d.max_new_tokens = limits.default_max_new_tokens;
    // The client did not ask for a length, so a long prompt should not make the request
    // invalid: generate until the context is full instead.
    d.stop_at_context_limit = true;
  } else if (request.max_new_tokens() > static_cast<uint32_t>(limits.max_max_new_tokens)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_new_tokens must be in [1, ", limits.max_max_new_tokens, "] (0 = default ",
                     limits.default_max_new_tokens, "), got ", request.max_new_tokens()));
  } else {
    d.max_new_tokens = static_cast<int>(request.max_new_tokens());
  }

  d.use_cache = request.has_use_cache() ? request.use_cache() : true;
  d.ignore_eos = request.ignore_eos();
  d.stop.assign(request.stop().begin(), request.stop().end());
  d.top_logprobs = ClampToInt(request.top_logprobs());
  auto overflow = ToContextOverflow(request.context_overflow());
  if (!overflow.ok()) return overflow.status();
  d.context_overflow = *overflow;
  if (request.n_keep() != 0 && d.context_overflow != ContextOverflow::kSlide) {
    return absl::InvalidArgumentError(
        "n_keep applies only with context_overflow CONTEXT_OVERFLOW_SLIDE");
  }
  d.n_keep = ClampToInt(request.n_keep());

  SamplingParams& s = d.sampling;
  // SAMPLE without a temperature samples from the model's distribution as it is (OpenAI's
  // default of 1.0), rather than silently decoding greedily.
  s.temperature = request.temperature() == 0.0f && d.method == DecodingMethod::kSample
                      ? 1.0f
                      : request.temperature();
  s.top_k = ClampToInt(request.top_k());
  s.top_p = request.top_p() == 0.0f ? 1.0f : request.top_p();
  s.min_p = request.min_p();
  s.repetition_penalty = request.repetition_penalty() == 0.0f ? 1.0f : request.repetition_penalty();
  if (request.has_seed()) s.seed = request.seed();

  BeamSearchOptions& b = d.beam;
  // 0 means the proto default of one beam.
  b.num_beams = request.num_beams() == 0 ? 1 : ClampToInt(request.num_beams());
  b.length_penalty = request.has_length_penalty() ? request.length_penalty() : 1.0f;
  auto early = ToEarlyStopping(request.early_stopping());
  if (!early.ok()) return early.status();
  b.early_stopping = *early;
  b.num_return_sequences =
      request.num_return_sequences() == 0 ? 1 : ClampToInt(request.num_return_sequences());
  b.max_new_tokens = d.max_new_tokens;
  b.ignore_eos = d.ignore_eos;

  d.speculation = limits.speculation;
  if (request.has_speculative()) {
    if (!request.speculative()) {
      d.speculation.source = DraftSource::kNone;
    } else if (d.speculation.source == DraftSource::kNone) {
      d.speculation.source = limits.asked_draft_source;
    }
  }
  return d;
}

template <typename Req>
absl::Status ApplyPrediction(const Req& request, const RequestLimits& limits, EngineRequest* out) {
  TG_RETURN_IF_ERROR(CheckPromptBytes("prediction", request.prediction().size(), limits));
  out->prediction_text = request.prediction();
  return absl::OkStatus();
}

template absl::Status ApplyPrediction(const v1::GenerateRequest&, const RequestLimits&,
                                      EngineRequest*);
template absl::Status ApplyPrediction(const v1::ChatRequest&, const RequestLimits&, EngineRequest*);

template absl::StatusOr<DecodingOptions> ToDecodingOptions(const v1::GenerateRequest&,
                                                           const RequestLimits&);
template absl::StatusOr<DecodingOptions> ToDecodingOptions(const v1::ChatRequest&,
                                                           const RequestLimits&);

absl::StatusOr<EngineRequest> ToEngineRequest(const v1::GenerateRequest& request,
                                              const RequestLimits& limits) {
  EngineRequest out;
  const bool has_text = !request.prompt().empty();
  const bool has_ids = request.prompt_ids_size() > 0;
  if (has_text == has_ids) {
    return absl::InvalidArgumentError("exactly one of prompt and prompt_ids must be set");
  }
  if (has_text) {
    if (absl::Status st = CheckPromptBytes("prompt", request.prompt().size(), limits); !st.ok()) {
      return st;
    }
    out.prompt_text = request.prompt();
  } else {
    out.prompt_ids.assign(request.prompt_ids().begin(), request.prompt_ids().end());
    if (request.has_add_bos()) {
      return absl::InvalidArgumentError(
          "add_bos applies only to prompt (text); prompt_ids are taken as they are");
    }
  }
  if (request.has_add_bos()) out.add_bos = request.add_bos();
  if (absl::Status st = CheckSessionId(request.session_id()); !st.ok()) return st;
  out.session_id = request.session_id();
  auto decoding = ToDecodingOptions(request, limits);
  if (!decoding.ok()) return decoding.status();
  out.decoding = *std::move(decoding);
  TG_RETURN_IF_ERROR(ApplyPrediction(request, limits, &out));
  return out;
}

absl::Status CheckSessionId(const std::string& session_id) {
  if (session_id.empty()) return absl::OkStatus();
  bool hex = session_id.size() == 32;
  for (size_t i = 0; hex && i < session_id.size(); ++i) {
    const char c = session_id[i];
    hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  }
  if (hex) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("session_id: must be 32 lowercase hex characters (got ", session_id.size(),
                   " bytes of another form)"));
}

absl::Status CheckChosenSessionId(const std::string& session_id) {
  TG_RETURN_IF_ERROR(CheckSessionId(session_id));
  if (session_id.empty()) return absl::OkStatus();
  bool seen[16] = {};
  int distinct = 0;
  for (char c : session_id) {
    const int digit = c <= '9' ? c - '0' : c - 'a' + 10;
    if (!seen[digit]) ++distinct;
    seen[digit] = true;
  }
  if (distinct >= kMinDistinctSessionIdDigits) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "session_id: does not look random (a chosen id must be 128 random bits, e.g. from "
      "/dev/urandom); leave it empty and the server picks one");
}

}  // namespace textgen::server
