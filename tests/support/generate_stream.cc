#include "tests/support/generate_stream.h"

#include <chrono>
#include <memory>

namespace textgen::testing {

namespace {

// Reads a stream to its end.
template <typename Reader>
StreamResult Collect(Reader& reader) {
  StreamResult r;
  textgen::v1::GenerateResponse msg;
  while (reader.Read(&msg)) {
    for (const auto& t : msg.tokens()) r.ids.push_back(t.id());
    r.text += msg.text();
    r.messages.push_back(msg);
  }
  r.status = reader.Finish();
  if (!r.messages.empty()) r.last = r.messages.back();
  return r;
}

}  // namespace

StreamResult RunChat(textgen::v1::TextGeneration::Stub& stub, const textgen::v1::ChatRequest& req,
                     int deadline_ms, const CallMetadata& metadata) {
  grpc::ClientContext ctx;
  if (deadline_ms > 0) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  }
  ctx.set_wait_for_ready(true);
  for (const auto& [key, value] : metadata) ctx.AddMetadata(key, value);
  auto reader = stub.Chat(&ctx, req);
  return Collect(*reader);
}

StreamResult RunGenerate(textgen::v1::TextGeneration::Stub& stub,
                         const textgen::v1::GenerateRequest& req, int deadline_ms,
                         const CallMetadata& metadata) {
  grpc::ClientContext ctx;
  if (deadline_ms > 0) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  }
  // A fresh channel's first connect can fail transiently when many connect at once (seen:
  // "failed to connect to all addresses" with 16 new channels under load); wait for the
  // channel to be ready instead of failing fast, as a real client would.
  ctx.set_wait_for_ready(true);
  for (const auto& [key, value] : metadata) ctx.AddMetadata(key, value);
  auto reader = stub.Generate(&ctx, req);
  return Collect(*reader);
}

}  // namespace textgen::testing
