// Errors of the OpenAI-compatible API: the one place where an absl::Status becomes an HTTP
// status and OpenAI's error body {"error": {"message", "type", "param", "code"}}.
//
// Request checks name the offending field with FieldError, which carries it as the status'
// "param" payload, so the body's `param` names it exactly as the client spelled it.
#ifndef TEXTGEN_SERVER_OPENAI_API_ERROR_H_
#define TEXTGEN_SERVER_OPENAI_API_ERROR_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace textgen::server::openai {

// InvalidArgument "`param`: `message`" with `param` attached (shown as the body's `param`).
absl::Status FieldError(std::string_view param, std::string_view message);
// `status` with `param` attached (e.g. NotFound for an unknown model, naming "model").
absl::Status WithParam(absl::Status status, std::string_view param);
// The field FieldError or WithParam attached, if any.
std::optional<std::string> ErrorParam(const absl::Status& status);

struct ApiError {
  int http_status = 500;
  std::string type;     // "invalid_request_error", "rate_limit_error", "server_error", ...
  std::string message;  // the status' message, verbatim
  std::optional<std::string> param;
  std::optional<std::string> code;
};

// InvalidArgument, FailedPrecondition, OutOfRange -> 400 invalid_request_error; NotFound -> 404;
// ResourceExhausted (queue full, or a request the KV pool can never hold) -> 429
// rate_limit_error; Unauthenticated (no or a wrong API key) -> 401 invalid_request_error with
// code invalid_api_key, as OpenAI answers; Unavailable (loading, draining) and Cancelled -> 503;
// Unimplemented -> 501; anything else -> 500 server_error. Never called with OK.
ApiError ToApiError(const absl::Status& status);

// {"error": {...}} as JSON text (valid UTF-8 whatever the message holds).
std::string ErrorBody(const ApiError& error);

// The code name counted in textgen_requests_total for this status ("OK", "INVALID_ARGUMENT",
// ...), the same names the gRPC API's requests are counted under.
std::string MetricsCode(const absl::Status& status);

}  // namespace textgen::server::openai

#endif  // TEXTGEN_SERVER_OPENAI_API_ERROR_H_
