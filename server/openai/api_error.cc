#include "server/openai/api_error.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace textgen::server::openai {
namespace {

constexpr char kParamPayload[] = "textgen/openai/param";

}  // namespace

absl::Status WithParam(absl::Status status, std::string_view param) {
  status.SetPayload(kParamPayload, absl::Cord(std::string(param)));
  return status;
}

absl::Status FieldError(std::string_view param, std::string_view message) {
  return WithParam(
      absl::InvalidArgumentError(absl::StrCat(std::string(param), ": ", std::string(message))),
      param);
}

std::optional<std::string> ErrorParam(const absl::Status& status) {
  auto param = status.GetPayload(kParamPayload);
  if (!param.has_value()) return std::nullopt;
  return std::string(*param);
}

ApiError ToApiError(const absl::Status& status) {
  ApiError e;
  e.message = std::string(status.message());
  e.param = ErrorParam(status);
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      e.http_status = 400;
      e.type = "invalid_request_error";
      break;
    case absl::StatusCode::kNotFound:
      e.http_status = 404;
      e.type = "invalid_request_error";
      e.code = "not_found";
      break;
    case absl::StatusCode::kResourceExhausted:
      // The engine's queue is full (retrying later helps, which is what clients do on 429).
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "rate_limit_exceeded";
      break;
    case absl::StatusCode::kUnauthenticated:
      e.http_status = 401;
      e.type = "invalid_request_error";
      e.code = "invalid_api_key";
      break;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
      e.http_status = 503;
      e.type = "server_error";
      e.code = "service_unavailable";
      break;
    case absl::StatusCode::kUnimplemented:
      e.http_status = 501;
      e.type = "invalid_request_error";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

std::string ErrorBody(const ApiError& error) {
  nlohmann::ordered_json body = {
      {"message", error.message}, {"type", error.type}, {"param", nullptr}, {"code", nullptr}};
  if (error.param.has_value()) body["param"] = *error.param;
  if (error.code.has_value()) body["code"] = *error.code;
  return nlohmann::ordered_json{{"error", body}}.dump(-1, ' ', false,
                                                      nlohmann::json::error_handler_t::replace);
}

std::string MetricsCode(const absl::Status& status) {
  return absl::StatusCodeToString(status.code());
}

}  // namespace textgen::server::openai
