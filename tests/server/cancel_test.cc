// A client that goes away mid-stream (cancel, deadline) stops its engine request: the KV
// blocks come back.
#include <catch2/catch.hpp>

#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace cancel_test {

// Free blocks once nothing runs (other tests' cancelled requests may still be winding down).
uint32_t IdleFreeBlocks(v1::TextGeneration::Stub& stub) {
  const v1::ModelInfo info = GetInfo(stub);
  uint32_t free = info.kv_blocks_free();
  // Stable for a few polls = idle.
  for (int same = 0; same < 3;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const uint32_t now = GetInfo(stub).kv_blocks_free();
    same = now == free ? same + 1 : 0;
    free = now;
  }
  return free;
}

TEST_CASE("a client cancelling mid-stream frees the request's KV blocks", "[server][cancel]") {
  auto stub = NewStub(SharedServer());
  const uint32_t idle = IdleFreeBlocks(*stub);

  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, EndlessRequest());
  v1::GenerateResponse msg;
  int read = 0;
  while (read < 5 && reader->Read(&msg)) ++read;
  REQUIRE(read == 5);
  CHECK(GetInfo(*stub).kv_blocks_free() < idle);  // the request holds blocks
  ctx.TryCancel();
  while (reader->Read(&msg)) {
  }
  CHECK(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);
  CHECK(WaitForFreeBlocks(*stub, idle) == idle);
}

TEST_CASE("a deadline expiring mid-stream frees the request's KV blocks", "[server][cancel]") {
  auto stub = NewStub(SharedServer());
  const uint32_t idle = IdleFreeBlocks(*stub);
  StreamResult r = RunGenerate(*stub, EndlessRequest(), /*deadline_ms=*/300);
  CHECK(r.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  CHECK(!r.messages.empty());  // it was cut mid-stream
  CHECK(WaitForFreeBlocks(*stub, idle) == idle);
}

TEST_CASE("many cancelled streams leave nothing behind", "[server][cancel]") {
  auto stub = NewStub(SharedServer());
  const uint32_t idle = IdleFreeBlocks(*stub);
  constexpr int kStreams = 8;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>>> readers;
  for (int i = 0; i < kStreams; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(stub->Generate(contexts.back().get(), EndlessRequest()));
  }
  v1::GenerateResponse msg;
  for (auto& r : readers) REQUIRE(r->Read(&msg));
  for (auto& c : contexts) c->TryCancel();
  for (auto& r : readers) {
    while (r->Read(&msg)) {
    }
    CHECK(r->Finish().error_code() == grpc::StatusCode::CANCELLED);
  }
  CHECK(WaitForFreeBlocks(*stub, idle) == idle);
}

}  // namespace cancel_test
}  // namespace textgen::testing
