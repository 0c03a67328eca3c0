#include "server/parsed_request.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "server/response_convert.h"

namespace textgen::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

// The path of the first string field in `bytes` (a serialized `type`) that holds invalid
// UTF-8, "" if none does (or the bytes end too early to tell).
std::string FindInvalidUtf8(absl::string_view bytes, const Descriptor* type, int depth) {
  if (depth > 16) return "";  // our messages nest two deep; deeper is not ours to check
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  std::map<int, int> seen;  // field number -> occurrences so far, for "stop[1]"
  while (const uint32_t tag = in.ReadTag()) {
    const FieldDescriptor* field = type->FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    const bool nested = field != nullptr && (field->type() == FieldDescriptor::TYPE_STRING ||
                                             field->type() == FieldDescriptor::TYPE_MESSAGE);
    if (!nested ||
        WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return "";
      continue;
    }
    uint32_t length = 0;
    std::string value;
    if (!in.ReadVarint32(&length) || !in.ReadString(&value, static_cast<int>(length))) return "";
    std::string name = field->name();
    if (field->is_repeated()) absl::StrAppend(&name, "[", seen[field->number()]++, "]");
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      if (ValidUtf8(value) != value) return name;
    } else if (std::string inner = FindInvalidUtf8(value, field->message_type(), depth + 1);
               !inner.empty()) {
      return absl::StrCat(name, ".", inner);
    }
  }
  return "";
}

}  // namespace

absl::Status ParseRequest(absl::string_view bytes, google::protobuf::Message* message) {
  if (message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::OkStatus();
  }
  const Descriptor* type = message->GetDescriptor();
  message->Clear();
  if (std::string field = FindInvalidUtf8(bytes, type, 0); !field.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": not valid UTF-8"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid ", type->full_name(), " (malformed protobuf)"));
}

}  // namespace textgen::server
