// Errors of the Anthropic Messages API: an absl::Status as Anthropic's error body
// {"type": "error", "error": {"type", "message"}} with the HTTP status and error type of the
// server's one error table (server/error_table.h): 400 invalid_request_error, 401
// authentication_error, 404 not_found_error, 429 rate_limit_error, 503 overloaded_error (loading,
// draining), 500 api_error. The message names the field for request errors ("max_tokens: is
// required"); Anthropic's shape has no separate param.
#ifndef TEXTGEN_SERVER_ANTHROPIC_ANTHROPIC_ERROR_H_
#define TEXTGEN_SERVER_ANTHROPIC_ANTHROPIC_ERROR_H_

#include <string>

#include "absl/status/status.h"

namespace textgen::server::anthropic {

// MapError(status.code()).http_status. Never called with OK.
int HttpStatusOf(const absl::Status& status);

// The error body as JSON text (valid UTF-8 whatever the message holds).
std::string ErrorBody(const absl::Status& status);
// The same for an HTTP-level error that has no status (httplib's 404, 413, ...).
std::string ErrorBody(const char* type, const std::string& message);

}  // namespace textgen::server::anthropic

#endif  // TEXTGEN_SERVER_ANTHROPIC_ANTHROPIC_ERROR_H_
