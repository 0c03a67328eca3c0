// Typed reads of one JSON request object's fields. Every error is a FieldError naming the field
// (with the caller's prefix, e.g. "messages[2].content") and what was expected. An absent field
// and an explicit null both leave the output unset, as OpenAI's API treats them.
#ifndef TEXTGEN_SERVER_OPENAI_JSON_FIELDS_H_
#define TEXTGEN_SERVER_OPENAI_JSON_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace textgen::server::openai {

class JsonFields {
 public:
  // `object` must be a JSON object and outlive this reader.
  JsonFields(const nlohmann::ordered_json& object, std::string prefix)
      : object_(object), prefix_(std::move(prefix)) {}

  // The field as the client named it, e.g. "stream_options.include_usage".
  std::string Name(std::string_view key) const;
  // Present and not null.
  bool Has(std::string_view key) const;
  const nlohmann::ordered_json* Get(std::string_view key) const;

  absl::Status Bool(std::string_view key, std::optional<bool>* out) const;
  // An integer (no fraction) in [min, max].
  absl::Status Int(std::string_view key, int64_t min, int64_t max,
                   std::optional<int64_t>* out) const;
  // A finite number in [min, max] (bounds inclusive unless min_exclusive).
  absl::Status Number(std::string_view key, double min, double max, bool min_exclusive,
                      std::optional<double>* out) const;
  absl::Status String(std::string_view key, std::optional<std::string>* out) const;

 private:
  const nlohmann::ordered_json& object_;
  const std::string prefix_;
};

// "expected a number, got a string" style name of a JSON value's type.
std::string JsonTypeName(const nlohmann::ordered_json& value);

}  // namespace textgen::server::openai

#endif  // TEXTGEN_SERVER_OPENAI_JSON_FIELDS_H_
