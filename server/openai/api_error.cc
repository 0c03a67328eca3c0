#include "server/openai/api_error.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/error_table.h"

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
  const ErrorMapping& m = MapError(status.code());
  ApiError e;
  e.message = std::string(status.message());
  e.param = ErrorParam(status);
  e.http_status = m.http_status;
  e.type = m.openai_type;
  if (m.openai_code != nullptr) e.code = m.openai_code;
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

}  // namespace textgen::server::openai
