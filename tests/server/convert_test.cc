// The API <-> engine conversions without a server: proto defaults, limits, status codes.
#include <catch2/catch.hpp>
#include <functional>

#include "server/error_table.h"
#include "server/request_convert.h"
#include "server/response_convert.h"

namespace textgen::server {
namespace convert_test {

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
  req.set_session_id("0123456789abcdef0123456789abcdef");
  req.set_method(v1::SAMPLE);
  req.set_max_new_tokens(7);
  req.set_use_cache(false);
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
  auto r = ToEngineRequest(req, {});
  REQUIRE(r.ok());
  CHECK(r->prompt_ids == std::vector<int32_t>{1, 5});
  CHECK(!r->prompt_text.has_value());
  CHECK(r->session_id == "0123456789abcdef0123456789abcdef");
  CHECK(!r->add_bos.has_value());
  const DecodingOptions& d = r->decoding;
  CHECK(d.method == DecodingMethod::kSample);
  CHECK(d.max_new_tokens == 7);
  CHECK(!d.stop_at_context_limit);
  CHECK(!d.use_cache);
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

TEST_CASE("beam fields are carried over", "[server][convert]") {
  v1::GenerateRequest req;
  req.set_prompt("hi");
  req.set_add_bos(false);
  req.set_method(v1::BEAM);
  req.set_num_beams(4);
  req.set_length_penalty(0.5f);
  req.set_early_stopping(v1::NEVER);
  req.set_num_return_sequences(2);
  auto r = ToEngineRequest(req, {});
  REQUIRE(r.ok());
  CHECK(r->add_bos == false);
  CHECK(r->decoding.method == DecodingMethod::kBeam);
  CHECK(r->decoding.beam.num_beams == 4);
  CHECK(r->decoding.beam.length_penalty == 0.5f);
  CHECK(r->decoding.beam.early_stopping == EarlyStopping::kNever);
  CHECK(r->decoding.beam.num_return_sequences == 2);
}

// The method a request gets when it leaves `method` unset.
DecodingMethod Inferred(const std::function<void(v1::GenerateRequest*)>& edit) {
  v1::GenerateRequest req;
  req.set_prompt("hi");
  edit(&req);
  REQUIRE(!req.has_method());
  auto r = ToEngineRequest(req, {});
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return r->decoding.method;
}

TEST_CASE("an unset method follows the other fields", "[server][convert]") {
  CHECK(Inferred([](auto*) {}) == DecodingMethod::kGreedy);
  CHECK(Inferred([](auto* r) { r->set_temperature(0.8f); }) == DecodingMethod::kSample);
  CHECK(Inferred([](auto* r) { r->set_top_k(40); }) == DecodingMethod::kSample);
  CHECK(Inferred([](auto* r) { r->set_top_p(0.9f); }) == DecodingMethod::kSample);
  CHECK(Inferred([](auto* r) { r->set_min_p(0.1f); }) == DecodingMethod::kSample);
  CHECK(Inferred([](auto* r) { r->set_seed(3); }) == DecodingMethod::kSample);
  CHECK(Inferred([](auto* r) { r->set_num_beams(4); }) == DecodingMethod::kBeam);
  CHECK(Inferred([](auto* r) { r->set_length_penalty(0.5f); }) == DecodingMethod::kBeam);
  // One beam is greedy decoding; the field takes effect either way.
  CHECK(Inferred([](auto* r) { r->set_num_beams(1); }) == DecodingMethod::kGreedy);
  // repetition_penalty belongs to every method.
  CHECK(Inferred([](auto* r) { r->set_repetition_penalty(1.2f); }) == DecodingMethod::kGreedy);
}

TEST_CASE("SAMPLE without a temperature samples at 1.0", "[server][convert]") {
  v1::GenerateRequest req;
  req.set_prompt("hi");
  req.set_method(v1::SAMPLE);
  auto r = ToEngineRequest(req, {});
  REQUIRE(r.ok());
  CHECK(r->decoding.method == DecodingMethod::kSample);
  CHECK(r->decoding.sampling.temperature == 1.0f);
  req.clear_method();
  req.set_top_k(5);
  r = ToEngineRequest(req, {});
  REQUIRE(r.ok());
  CHECK(r->decoding.sampling.temperature == 1.0f);
}

TEST_CASE("a field the request's method would ignore is refused naming it", "[server][convert]") {
  struct Case {
    const char* name;
    std::function<void(v1::GenerateRequest*)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"GREEDY with temperature",
       [](auto* r) {
         r->set_method(v1::GREEDY);
         r->set_temperature(0.8f);
       },
       "temperature applies only to method SAMPLE"},
      {"GREEDY with seed",
       [](auto* r) {
         r->set_method(v1::GREEDY);
         r->set_seed(1);
       },
       "seed"},
      {"BEAM with top_k",
       [](auto* r) {
         r->set_method(v1::BEAM);
         r->set_top_k(4);
       },
       "top_k"},
      {"SAMPLE with num_beams",
       [](auto* r) {
         r->set_method(v1::SAMPLE);
         r->set_num_beams(4);
       },
       "num_beams applies only to method BEAM"},
      {"unset method with num_beams and temperature",
       [](auto* r) {
         r->set_num_beams(4);
         r->set_temperature(0.5f);
       },
       "temperature applies only to method SAMPLE"},
      {"GREEDY with length_penalty",
       [](auto* r) {
         r->set_method(v1::GREEDY);
         r->set_length_penalty(2.0f);
       },
       "length_penalty"},
      {"SAMPLE with early_stopping",
       [](auto* r) {
         r->set_method(v1::SAMPLE);
         r->set_early_stopping(v1::EARLY);
       },
       "early_stopping"},
      {"GREEDY with num_return_sequences",
       [](auto* r) {
         r->set_method(v1::GREEDY);
         r->set_num_return_sequences(2);
       },
       "num_return_sequences"},
      {"BEAM with top_logprobs",
       [](auto* r) {
         r->set_num_beams(2);
         r->set_top_logprobs(3);
       },
       "top_logprobs"},
      {"n_keep without sliding", [](auto* r) { r->set_n_keep(4); }, "n_keep"},
      {"add_bos with prompt_ids",
       [](auto* r) {
         r->clear_prompt();
         r->add_prompt_ids(1);
         r->set_add_bos(true);
       },
       "add_bos"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    v1::GenerateRequest req;
    req.set_prompt("hi");
    c.edit(&req);
    absl::Status st = ToEngineRequest(req, {}).status();
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(st.message()), Catch::Contains(c.field));
  }
}

TEST_CASE("ChatRequest's decoding fields convert as GenerateRequest's", "[server][convert]") {
  v1::ChatRequest chat;
  chat.set_temperature(0.5f);
  chat.set_top_k(3);
  chat.set_max_new_tokens(9);
  chat.add_stop("x");
  auto d = ToDecodingOptions(chat, {});
  REQUIRE(d.ok());
  CHECK(d->method == DecodingMethod::kSample);
  CHECK(d->sampling.temperature == 0.5f);
  CHECK(d->sampling.top_k == 3);
  CHECK(d->max_new_tokens == 9);
  CHECK(d->stop == std::vector<std::string>{"x"});
  chat.set_method(v1::GREEDY);
  CHECK(ToDecodingOptions(chat, {}).status().code() == absl::StatusCode::kInvalidArgument);
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
      {absl::OutOfRangeError("m"), grpc::StatusCode::OUT_OF_RANGE},
      {absl::PermissionDeniedError("m"), grpc::StatusCode::PERMISSION_DENIED},
      {absl::DeadlineExceededError("m"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::InternalError("m"), grpc::StatusCode::INTERNAL},
      {absl::UnknownError("m"), grpc::StatusCode::INTERNAL},
  };
  for (const auto& [in, want] : cases) {
    INFO(in.ToString());
    grpc::Status out = ToGrpcStatus(in);
    CHECK(out.error_code() == want);
    if (!in.ok()) CHECK(out.error_message() == "m");
    CHECK(std::string(GrpcCodeName(want)) != "UNKNOWN_CODE");
  }
}

TEST_CASE("one error table: every front end agrees on what is the client's fault",
          "[server][convert]") {
  // Every absl code: a 4xx HTTP status exactly when the gRPC code is a client's error, and the
  // metrics label is the gRPC code's name whichever front end counts it.
  for (int c = 1; c <= 16; ++c) {
    const auto code = static_cast<absl::StatusCode>(c);
    const absl::Status st(code, "m");
    INFO(st.ToString());
    const ErrorMapping& m = MapError(code);
    CHECK(ToGrpcStatus(st).error_code() == m.grpc_code);
    CHECK(MetricsCode(st) == GrpcCodeName(m.grpc_code));
    const bool server_fault = m.grpc_code == grpc::StatusCode::INTERNAL ||
                              m.grpc_code == grpc::StatusCode::UNAVAILABLE ||
                              m.grpc_code == grpc::StatusCode::CANCELLED ||
                              m.grpc_code == grpc::StatusCode::DEADLINE_EXCEEDED ||
                              m.grpc_code == grpc::StatusCode::UNIMPLEMENTED;
    CHECK((m.http_status >= 500) == server_fault);
    CHECK(std::string(m.openai_type).size() > 0);
    CHECK(std::string(m.anthropic_type).size() > 0);
  }
  CHECK(MapError(absl::StatusCode::kOutOfRange).http_status == 400);
  CHECK(MapError(absl::StatusCode::kNotFound).http_status == 404);
  CHECK(MapError(absl::StatusCode::kResourceExhausted).http_status == 429);
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

}  // namespace convert_test
}  // namespace textgen::server
