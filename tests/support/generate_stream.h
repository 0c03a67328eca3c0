// One Generate (or Chat) call run to its end, for end-to-end tests against a server or a proxy.
#ifndef TEXTGEN_TESTS_SUPPORT_GENERATE_STREAM_H_
#define TEXTGEN_TESTS_SUPPORT_GENERATE_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen::testing {

// Everything one Generate call returned.
struct StreamResult {
  grpc::Status status;
  std::vector<textgen::v1::GenerateResponse> messages;
  std::vector<int32_t> ids;  // every streamed token id, in order
  std::string text;          // every streamed text delta, concatenated
  textgen::v1::GenerateResponse last;
};

// gRPC metadata (key, value) pairs to send with a call, e.g. {{"x-session-id", id}}.
using CallMetadata = std::vector<std::pair<std::string, std::string>>;

// Runs Generate to its end. `deadline_ms` > 0 sets a deadline. Waits for the channel to be
// ready rather than failing fast on a first connect.
StreamResult RunGenerate(textgen::v1::TextGeneration::Stub& stub,
                         const textgen::v1::GenerateRequest& req, int deadline_ms = 30000,
                         const CallMetadata& metadata = {});

// Runs Chat to its end, as RunGenerate.
StreamResult RunChat(textgen::v1::TextGeneration::Stub& stub, const textgen::v1::ChatRequest& req,
                     int deadline_ms = 30000, const CallMetadata& metadata = {});

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_SUPPORT_GENERATE_STREAM_H_
