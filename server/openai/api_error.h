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
#include "server/error_table.h"

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

// The HTTP status, type and code of `status` from the server's one error table
// (server/error_table.h): 400 invalid_request_error for bad requests, 404 not_found, 429
// rate_limit_error (queue full, or a request the KV pool can never hold), 401 invalid_api_key,
// 503 while loading or draining, 500 server_error for faults. Never called with OK.
ApiError ToApiError(const absl::Status& status);

// {"error": {...}} as JSON text (valid UTF-8 whatever the message holds).
std::string ErrorBody(const ApiError& error);

}  // namespace textgen::server::openai

#endif  // TEXTGEN_SERVER_OPENAI_API_ERROR_H_
