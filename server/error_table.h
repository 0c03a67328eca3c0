// The one table of how an engine error (absl::Status) reaches each front end: its gRPC code,
// HTTP status, OpenAI and Anthropic error types, and the code name textgen_requests_total
// counts it under. Every front end converts through it, so the APIs cannot disagree (a status
// that is 400 over HTTP is a client error over gRPC too).
#ifndef TEXTGEN_SERVER_ERROR_TABLE_H_
#define TEXTGEN_SERVER_ERROR_TABLE_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace textgen::server {

struct ErrorMapping {
  grpc::StatusCode grpc_code;
  int http_status;
  const char* openai_type;     // "invalid_request_error", "rate_limit_error", "server_error", ...
  const char* openai_code;     // nullptr: none
  const char* anthropic_type;  // "invalid_request_error", "not_found_error", "api_error", ...
};

// The row for `code`. Codes gRPC has keep their name (OutOfRange -> OUT_OF_RANGE, 400: a
// request asked for more than exists); codes that only say the server failed (Internal,
// Unknown, DataLoss, Aborted) become INTERNAL / 500, so no accidental retry promise is made.
const ErrorMapping& MapError(absl::StatusCode code);

// The gRPC status of `status`: MapError's code, the message kept verbatim.
grpc::Status ToGrpcStatus(const absl::Status& status);

// "OK", "INVALID_ARGUMENT", ... (gRPC's names).
const char* GrpcCodeName(grpc::StatusCode code);

// The label textgen_requests_total counts a request under, the same for every front end: the
// gRPC code name of MapError(status.code()).
std::string MetricsCode(const absl::Status& status);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_ERROR_TABLE_H_
