// What the server logs of what clients send: one line per event whatever they send (no
// newlines or control bytes to forge lines, bounded length), and session ids only in part
// (enough to follow a conversation, not enough to take it over).
#ifndef TEXTGEN_SERVER_LOG_SAFE_H_
#define TEXTGEN_SERVER_LOG_SAFE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace textgen::server {

// `text` with control bytes, quotes, backslashes and non-ASCII bytes C-escaped (\n, \x1b, ...),
// cut to `max_bytes` of input with "...(N bytes)" appended when longer.
std::string LogSafe(absl::string_view text, size_t max_bytes = 256);

// "-" for no session, the first 8 characters and "..." for a well-formed id, "(malformed)"
// for anything else (it is never looked at further).
std::string LoggedSessionId(absl::string_view id);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_LOG_SAFE_H_
