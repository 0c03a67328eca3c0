// The API <-> engine conversions without a server: proto defaults, limits, status codes.
#include <catch2/catch.hpp>

#include "server/request_convert.h"
#include "server/response_convert.h"
#include "server/status_convert.h"

namespace textgen::server {
namespace {

TEST_CASE("proto defaults become the engine's explicit values", "[server][convert]") {
  v1::GenerateRequest req;
  req.set_prompt("hi");
  req.set_method(v1::BEAM);
  RequestLimits limits{100, 1000};
  auto r = ToEngineRequest(req, limits);
  REQUIRE(r.ok());
  CHECK(r->prompt_text == "hi");
  CHECK(r->prompt_ids.empty());
  CHECK(!r->add_bos.has_value());
  const DecodingOptions& d = r->decoding;
  CHECK(d.method == DecodingMethod::kBeam);
  CHECK(d.max_new_tokens == 100);
  CHECK(d.stop_at_context_limit);
  CHECK(d.use_cache);
  CHECK(d.beam.num_beams == 1);
  CHECK(d.beam.num_return_sequences == 1);
  CHECK(d.beam.length_penalty == 1.0f);
  CHECK(d.sampling.top_p == 1.0f);
  CHECK(d.sampling.repetition_penalty == 1.0f);
  CHECK(!d.sampling.seed.has_value());
}

TEST_CASE("explicit request fields are carried over", "[server][convert]") {
  v1::GenerateRequest req;
  req.add_prompt_ids(1);
  req.add_prompt_ids(5);
  req.set_session_id("abc");
  req.set_method(v1::SAMPLE);
  req.set_max_new_tokens(7);
  req.set_use_cache(false);
  req.set_length_penalty(0.5f);
  req.set_early_stopping(v1::NEVER);
  req.set_temperature(0.7f);
  req.set_top_k(40);
  req.set_top_p(0.9f);
  req.set_min_p(0.05f);
  req.set_repetition_penalty(1.1f);
  req.set_seed(42);
  req.add_stop(std::string(1, '\n'));  // (a literal trips GCC 12's false -Wrestrict)
  req.set_ignore_eos(true);
  req.set_top_logprobs(5);
  req.set_context_overflow(v1::CONTEXT_OVERFLOW_SLIDE);
  req.set_n_keep(4);
  req.set_add_bos(false);
  auto r = ToEngineRequest(req, {});
  REQUIRE(r.ok());
  CHECK(r->prompt_ids == std::vector<int32_t>{1, 5});
  CHECK(!r->prompt_text.has_value());
  CHECK(r->session_id == "abc");
  CHECK(r->add_bos == false);
  const DecodingOptions& d = r->decoding;
  CHECK(d.method == DecodingMethod::kSample);
  CHECK(d.max_new_tokens == 7);
  CHECK(!d.stop_at_context_limit);
  CHECK(!d.use_cache);
  CHECK(d.beam.length_penalty == 0.5f);
  CHECK(d.beam.early_stopping == EarlyStopping::kNever);
  CHECK(d.sampling.temperature == 0.7f);
  CHECK(d.sampling.top_k == 40);
  CHECK(d.sampling.top_p == 0.9f);
  CHECK(d.sampling.min_p == 0.05f);
  CHECK(d.sampling.repetition_penalty == 1.1f);
  CHECK(d.sampling.seed == 42u);
  CHECK(d.stop == std::vector<std::string>{"\n"});
  CHECK(d.ignore_eos);
  CHECK(d.top_logprobs == 5);
  CHECK(d.context_overflow == ContextOverflow::kSlide);
  CHECK(d.n_keep == 4);
}

TEST_CASE("requests the server rejects itself", "[server][convert]") {
  v1::GenerateRequest neither;
  CHECK(ToEngineRequest(neither, {}).status().code() == absl::StatusCode::kInvalidArgument);
  v1::GenerateRequest both;
  both.set_prompt("a");
  both.add_prompt_ids(1);
  CHECK(ToEngineRequest(both, {}).status().code() == absl::StatusCode::kInvalidArgument);
  v1::GenerateRequest too_long;
  too_long.set_prompt("a");
  too_long.set_max_new_tokens(5000);
  auto st = ToEngineRequest(too_long, {256, 4096}).status();
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(st.message()),
             Catch::Contains("max_new_tokens") && Catch::Contains("4096"));
}

TEST_CASE("absl status codes map to gRPC codes, message kept", "[server][convert]") {
  const std::vector<std::pair<absl::Status, grpc::StatusCode>> cases = {
      {absl::OkStatus(), grpc::StatusCode::OK},
      {absl::InvalidArgumentError("m"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::NotFoundError("m"), grpc::StatusCode::NOT_FOUND},
      {absl::FailedPreconditionError("m"), grpc::StatusCode::FAILED_PRECONDITION},
      {absl::ResourceExhaustedError("m"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::AlreadyExistsError("m"), grpc::StatusCode::ALREADY_EXISTS},
      {absl::UnavailableError("m"), grpc::StatusCode::UNAVAILABLE},
      {absl::CancelledError("m"), grpc::StatusCode::CANCELLED},
      {absl::UnimplementedError("m"), grpc::StatusCode::UNIMPLEMENTED},
      {absl::DataLossError("m"), grpc::StatusCode::INTERNAL},
      {absl::OutOfRangeError("m"), grpc::StatusCode::INTERNAL},
  };
  for (const auto& [in, want] : cases) {
    INFO(in.ToString());
    grpc::Status out = ToGrpcStatus(in);
    CHECK(out.error_code() == want);
    if (!in.ok()) CHECK(out.error_message() == "m");
    CHECK(std::string(GrpcCodeName(want)) != "UNKNOWN_CODE");
  }
}

TEST_CASE("gRPC code names for the logs", "[server][convert]") {
  CHECK(std::string(GrpcCodeName(grpc::StatusCode::OK)) == "OK");
  CHECK(std::string(GrpcCodeName(grpc::StatusCode::RESOURCE_EXHAUSTED)) == "RESOURCE_EXHAUSTED");
  CHECK(std::string(GrpcCodeName(grpc::StatusCode::UNAUTHENTICATED)) == "UNAUTHENTICATED");
}

TEST_CASE("strings sent to clients are valid UTF-8", "[server][convert]") {
  CHECK(ValidUtf8("héllo") == "héllo");
  CHECK(ValidUtf8("a\xe2\x82") == "a\xef\xbf\xbd");
  CHECK(ValidUtf8("\xff") == "\xef\xbf\xbd");
}

}  // namespace
}  // namespace textgen::server
