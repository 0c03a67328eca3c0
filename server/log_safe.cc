#include "server/log_safe.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/request_convert.h"

namespace textgen::server {

std::string LogSafe(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return absl::CHexEscape(text);
  return absl::StrCat(absl::CHexEscape(text.substr(0, max_bytes)), "...(", text.size(), " bytes)");
}

std::string LoggedSessionId(absl::string_view id) {
  if (id.empty()) return "-";
  if (!CheckSessionId(std::string(id)).ok()) return "(malformed)";
  return absl::StrCat(std::string(id.substr(0, 8)), "...");
}

}  // namespace textgen::server
