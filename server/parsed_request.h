// Requests parsed by the service itself, so that a request that does not parse is answered
// INVALID_ARGUMENT naming what is wrong. gRPC's own handlers answer a request they cannot parse
// with UNIMPLEMENTED and an empty message; proto3 `string` fields make invalid UTF-8 (a prompt,
// a stop string, a session id) such a parse failure. The wire format stays as it is: the fields
// stay `string`, and clients that send UTF-8 see no difference.
//
// TextGenerationService registers its methods with handlers over ParsedRequest<M>: gRPC hands
// them a ParsedRequest whose `error` says why `message` could not be parsed, and the service
// answers that error instead of calling the method.
#ifndef TEXTGEN_SERVER_PARSED_REQUEST_H_
#define TEXTGEN_SERVER_PARSED_REQUEST_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace textgen::server {

// Parses `bytes` into `message`. InvalidArgument naming the field ("prompt", "stop[1]",
// "messages[0].content") when a string field holds invalid UTF-8, or saying the bytes are not
// a valid message of its type otherwise.
absl::Status ParseRequest(absl::string_view bytes, google::protobuf::Message* message);

template <class M>
struct ParsedRequest {
  M message;
  absl::Status error;  // OK: `message` holds the request
};

}  // namespace textgen::server

namespace grpc {

// Deserialization that always succeeds as far as gRPC is concerned: the outcome travels in the
// ParsedRequest. Server side only (the service never sends a ParsedRequest).
template <class M>
class SerializationTraits<textgen::server::ParsedRequest<M>, void> {
 public:
  static Status Serialize(const textgen::server::ParsedRequest<M>&, ByteBuffer*, bool*) {
    return Status(StatusCode::INTERNAL, "ParsedRequest is never sent");
  }
  static Status Deserialize(ByteBuffer* buffer, textgen::server::ParsedRequest<M>* request) {
    std::vector<Slice> slices;
    std::string bytes;
    if (buffer != nullptr && buffer->Dump(&slices).ok()) {
      for (const Slice& s : slices)
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    // As gRPC's own deserializer does: the payload is consumed.
    if (buffer != nullptr) buffer->Clear();
    request->error = textgen::server::ParseRequest(bytes, &request->message);
    return Status::OK;
  }
};

}  // namespace grpc

#endif  // TEXTGEN_SERVER_PARSED_REQUEST_H_
