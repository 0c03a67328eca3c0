#include "server/error_table.h"

#include <iterator>
#include <string>

namespace textgen::server {

const ErrorMapping& MapError(absl::StatusCode code) {
  using G = grpc::StatusCode;
  static const ErrorMapping kOk{G::OK, 200, "", nullptr, ""};
  static const ErrorMapping kInvalid{G::INVALID_ARGUMENT, 400, "invalid_request_error", nullptr,
                                     "invalid_request_error"};
  static const ErrorMapping kPrecondition{G::FAILED_PRECONDITION, 400, "invalid_request_error",
                                          nullptr, "invalid_request_error"};
  static const ErrorMapping kOutOfRange{G::OUT_OF_RANGE, 400, "invalid_request_error", nullptr,
                                        "invalid_request_error"};
  static const ErrorMapping kNotFound{G::NOT_FOUND, 404, "invalid_request_error", "not_found",
                                      "not_found_error"};
  static const ErrorMapping kExists{G::ALREADY_EXISTS, 409, "invalid_request_error", nullptr,
                                    "invalid_request_error"};
  // The queue is full, or the KV pool can never hold the request: retrying later may help,
  // which is what clients do on 429.
  static const ErrorMapping kExhausted{G::RESOURCE_EXHAUSTED, 429, "rate_limit_error",
                                       "rate_limit_exceeded", "rate_limit_error"};
  static const ErrorMapping kUnauthenticated{G::UNAUTHENTICATED, 401, "invalid_request_error",
                                             "invalid_api_key", "authentication_error"};
  static const ErrorMapping kDenied{G::PERMISSION_DENIED, 403, "invalid_request_error", nullptr,
                                    "permission_error"};
  // Loading, draining, or the request was cancelled under the client (shutdown).
  static const ErrorMapping kUnavailable{G::UNAVAILABLE, 503, "server_error", "service_unavailable",
                                         "overloaded_error"};
  static const ErrorMapping kCancelled{G::CANCELLED, 503, "server_error", "service_unavailable",
                                       "api_error"};
  static const ErrorMapping kDeadline{G::DEADLINE_EXCEEDED, 504, "server_error", nullptr,
                                      "api_error"};
  static const ErrorMapping kUnimplemented{G::UNIMPLEMENTED, 501, "invalid_request_error", nullptr,
                                           "invalid_request_error"};
  static const ErrorMapping kInternal{G::INTERNAL, 500, "server_error", nullptr, "api_error"};
  switch (code) {
    case absl::StatusCode::kOk:
      return kOk;
    case absl::StatusCode::kInvalidArgument:
      return kInvalid;
    case absl::StatusCode::kFailedPrecondition:
      return kPrecondition;
    case absl::StatusCode::kOutOfRange:
      return kOutOfRange;
    case absl::StatusCode::kNotFound:
      return kNotFound;
    case absl::StatusCode::kAlreadyExists:
      return kExists;
    case absl::StatusCode::kResourceExhausted:
      return kExhausted;
    case absl::StatusCode::kUnauthenticated:
      return kUnauthenticated;
    case absl::StatusCode::kPermissionDenied:
      return kDenied;
    case absl::StatusCode::kUnavailable:
      return kUnavailable;
    case absl::StatusCode::kCancelled:
      return kCancelled;
    case absl::StatusCode::kDeadlineExceeded:
      return kDeadline;
    case absl::StatusCode::kUnimplemented:
      return kUnimplemented;
    default:
      return kInternal;
  }
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(MapError(status.code()).grpc_code, std::string(status.message()));
}

const char* GrpcCodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < static_cast<int>(std::size(kNames)) ? kNames[i] : "UNKNOWN_CODE";
}

std::string MetricsCode(const absl::Status& status) {
  return GrpcCodeName(MapError(status.code()).grpc_code);
}

}  // namespace textgen::server
