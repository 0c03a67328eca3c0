#include "server/anthropic/anthropic_error.h"

#include "nlohmann/json.hpp"
#include "server/error_table.h"

namespace textgen::server::anthropic {

int HttpStatusOf(const absl::Status& status) { return MapError(status.code()).http_status; }

std::string ErrorBody(const char* type, const std::string& message) {
  const nlohmann::ordered_json body = {{"type", "error"},
                                       {"error", {{"type", type}, {"message", message}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ErrorBody(const absl::Status& status) {
  return ErrorBody(MapError(status.code()).anthropic_type, std::string(status.message()));
}

}  // namespace textgen::server::anthropic
