// The OpenAI-compatible HTTP API end to end (a real textgen-server on loopback): /v1/models,
// /v1/completions whole and streamed, the same tokens as the gRPC API, n, beams, stop, logprobs,
// usage, the page, and the metrics that count it.
#include <catch2/catch.hpp>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "tests/server/openai_test_util.h"
#include "tests/support/metrics_scrape.h"

namespace textgen::testing {
namespace openai_completions_test {

constexpr char kPrompt[] = "Once upon a time";

// Every streamed token of a gRPC Generate, with its logprob.
struct GrpcAnswer {
  std::string text;
  std::vector<double> logprobs;
  std::vector<std::string> hypotheses;
};

GrpcAnswer GrpcGenerate(v1::GenerateRequest req) {
  auto stub = NewStub(*SharedHttpServer().process);
  StreamResult r = RunGenerate(*stub, req);
  REQUIRE(r.status.ok());
  GrpcAnswer a{r.text, {}, {}};
  for (const auto& m : r.messages) {
    for (const auto& t : m.tokens()) a.logprobs.push_back(t.logprob());
  }
  for (const auto& h : r.last.hypotheses()) a.hypotheses.push_back(h.text());
  return a;
}

Json Completion(const Json& body) {
  HttpReply r = Post(SharedHttpServer().http_port, "/v1/completions", body);
  INFO(r.body);
  REQUIRE(r.status == 200);
  REQUIRE(r.content_type == "application/json");
  return r.json;
}

SseStream StreamCompletion(const Json& body) {
  HttpReply r = Post(SharedHttpServer().http_port, "/v1/completions", body);
  INFO(r.body);
  REQUIRE(r.status == 200);
  REQUIRE(r.content_type == "text/event-stream");
  SseStream s = ParseSse(r.body);
  REQUIRE(s.done);
  return s;
}

// The texts of a streamed response per choice index, checking each chunk's envelope.
std::vector<std::string> StreamedTexts(const SseStream& s, const std::string& id, int n,
                                       std::vector<std::string>* finish) {
  std::vector<std::string> texts(n);
  finish->assign(n, "");
  for (const Json& c : s.chunks) {
    CHECK(c.at("object") == "text_completion");
    CHECK(c.at("id") == id);
    for (const Json& choice : c.at("choices")) {
      const int i = choice.at("index").get<int>();
      REQUIRE(i >= 0);
      REQUIRE(i < n);
      CHECK((*finish)[i].empty());  // nothing after a choice's end
      texts[i] += choice.at("text").get<std::string>();
      if (!choice.at("finish_reason").is_null()) (*finish)[i] = choice.at("finish_reason");
    }
  }
  return texts;
}

TEST_CASE("GET /v1/models lists the served model, and by id", "[server][openai]") {
  HttpServer& s = SharedHttpServer();
  HttpReply list = Get(s.http_port, "/v1/models");
  REQUIRE(list.status == 200);
  CHECK(list.json.at("object") == "list");
  REQUIRE(list.json.at("data").size() == 1);
  const Json& model = list.json["data"][0];
  CHECK(model.at("id") == "stories260K.gguf");
  CHECK(model.at("object") == "model");
  CHECK(model.at("owned_by") == "textgen");
  HttpReply one = Get(s.http_port, "/v1/models/stories260K.gguf");
  REQUIRE(one.status == 200);
  CHECK(one.json == model);
  HttpReply missing = Get(s.http_port, "/v1/models/gpt-4o");
  CHECK(missing.status == 404);
  CHECK(ErrorOf(missing).at("param") == "model");
  CHECK_THAT(ErrorOf(missing).at("message").get<std::string>(),
             Catch::Contains("stories260K.gguf"));
}

TEST_CASE("greedy completions give the gRPC API's tokens, whole and streamed", "[server][openai]") {
  v1::GenerateRequest req;
  req.set_prompt(kPrompt);
  req.set_max_new_tokens(40);
  req.set_top_logprobs(3);
  const GrpcAnswer grpc = GrpcGenerate(req);
  REQUIRE(grpc.logprobs.size() == 40);

  const Json body = {{"model", "stories260K.gguf"},
                     {"prompt", kPrompt},
                     {"max_tokens", 40},
                     {"temperature", 0},
                     {"logprobs", 3}};
  const Json whole = Completion(body);
  CHECK(whole.at("object") == "text_completion");
  CHECK(whole.at("model") == "stories260K.gguf");
  CHECK(whole.at("id").get<std::string>().rfind("cmpl-", 0) == 0);
  REQUIRE(whole.at("choices").size() == 1);
  const Json& choice = whole["choices"][0];
  CHECK(choice.at("index") == 0);
  CHECK(choice.at("text") == grpc.text);
  CHECK(choice.at("finish_reason") == "length");
  const Json& lp = choice.at("logprobs");
  REQUIRE(lp.at("token_logprobs").size() == 40);
  REQUIRE(lp.at("tokens").size() == 40);
  REQUIRE(lp.at("top_logprobs").size() == 40);
  std::string joined;
  for (size_t i = 0; i < 40; ++i) {
    CHECK(std::abs(lp["token_logprobs"][i].get<double>() - grpc.logprobs[i]) < 1e-6);
    CHECK(lp["text_offset"][i] == joined.size());
    joined += lp["tokens"][i].get<std::string>();
    CHECK(lp["top_logprobs"][i].size() <= 3);
    CHECK(lp["top_logprobs"][i].size() >= 2);  // alternatives may share a text, never all
  }
  CHECK(joined == grpc.text);  // stories260K's tokens are whole characters
  const Json& usage = whole.at("usage");
  CHECK(usage.at("completion_tokens") == 40);
  CHECK(usage.at("prompt_tokens").get<int>() > 1);
  CHECK(usage.at("total_tokens") ==
        usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());
  CHECK(usage.at("prompt_tokens_details").at("cached_tokens") == 0);

  Json stream_body = body;
  stream_body["stream"] = true;
  const SseStream s = StreamCompletion(stream_body);
  REQUIRE(s.chunks.size() >= 3);  // tokens arrive as they are made, not in one piece
  std::vector<std::string> finish;
  const std::string id = s.chunks[0].at("id");
  std::vector<std::string> texts = StreamedTexts(s, id, 1, &finish);
  CHECK(texts[0] == grpc.text);
  CHECK(finish[0] == "length");
  std::vector<double> streamed_lp;
  for (const Json& c : s.chunks) {
    CHECK_FALSE(c.contains("usage"));  // only with stream_options.include_usage
    for (const Json& ch : c["choices"]) {
      if (ch["logprobs"].is_null()) continue;
      for (const Json& v : ch["logprobs"]["token_logprobs"]) streamed_lp.push_back(v);
    }
  }
  REQUIRE(streamed_lp.size() == grpc.logprobs.size());
  for (size_t i = 0; i < streamed_lp.size(); ++i) {
    CHECK(std::abs(streamed_lp[i] - grpc.logprobs[i]) < 1e-6);
  }
}

TEST_CASE("a prompt of token ids equals the same prompt as text", "[server][openai]") {
  auto stub = NewStub(*SharedHttpServer().process);
  grpc::ClientContext ctx;
  v1::TokenizeRequest treq;
  treq.set_text(kPrompt);
  treq.set_add_special(true);
  v1::TokenizeResponse tres;
  REQUIRE(stub->Tokenize(&ctx, treq, &tres).ok());
  const std::vector<int32_t> ids(tres.ids().begin(), tres.ids().end());
  const Json a = Completion({{"prompt", kPrompt}, {"max_tokens", 16}, {"temperature", 0}});
  const Json b = Completion({{"prompt", ids}, {"max_tokens", 16}, {"temperature", 0}});
  const Json c =
      Completion({{"prompt", Json::array({ids})}, {"max_tokens", 16}, {"temperature", 0}});
  CHECK(a["choices"][0]["text"] == b["choices"][0]["text"]);
  CHECK(a["choices"][0]["text"] == c["choices"][0]["text"]);
  CHECK(a["usage"]["prompt_tokens"] == ids.size());
}

TEST_CASE("include_usage ends the stream with a usage chunk without choices", "[server][openai]") {
  const SseStream s = StreamCompletion({{"prompt", kPrompt},
                                        {"max_tokens", 8},
                                        {"temperature", 0},
                                        {"stream", true},
                                        {"stream_options", {{"include_usage", true}}}});
  REQUIRE(s.chunks.size() >= 2);
  for (size_t i = 0; i + 1 < s.chunks.size(); ++i) CHECK(s.chunks[i].at("usage").is_null());
  const Json& last = s.chunks.back();
  CHECK(last.at("choices").empty());
  CHECK(last.at("usage").at("completion_tokens") == 8);
  CHECK(last["usage"]["total_tokens"] == last["usage"]["prompt_tokens"].get<int>() + 8);
}

TEST_CASE("stop strings end the answer before them, a string or an array", "[server][openai]") {
  const Json free = Completion({{"prompt", kPrompt}, {"max_tokens", 40}, {"temperature", 0}});
  const std::string text = free["choices"][0]["text"];
  const size_t at = text.find("Lily");
  REQUIRE(at != std::string::npos);  // ", there was a little girl named Lily. ..."
  for (const Json& stop : {Json("Lily"), Json::array({"zzz", "Lily"})}) {
    const Json r =
        Completion({{"prompt", kPrompt}, {"max_tokens", 40}, {"temperature", 0}, {"stop", stop}});
    CHECK(r["choices"][0]["text"] == text.substr(0, at));
    CHECK(r["choices"][0]["finish_reason"] == "stop");
  }
}

TEST_CASE("n seeded samples: each choice reproducible, the choices differ", "[server][openai]") {
  const Json body = {
      {"prompt", kPrompt}, {"max_tokens", 24}, {"temperature", 1.0}, {"seed", 7}, {"n", 3}};
  const Json a = Completion(body);
  const Json b = Completion(body);
  REQUIRE(a.at("choices").size() == 3);
  std::set<std::string> distinct;
  int tokens = 0;
  for (int i = 0; i < 3; ++i) {
    CHECK(a["choices"][i]["index"] == i);
    CHECK(a["choices"][i]["text"] == b["choices"][i]["text"]);
    distinct.insert(a["choices"][i]["text"].get<std::string>());
  }
  CHECK(distinct.size() == 3);
  for (const Json& c : a["choices"]) tokens += c["finish_reason"] == "length" ? 24 : 0;
  CHECK(a["usage"]["completion_tokens"].get<int>() >= tokens);

  // The same seed through gRPC gives choice 0 (choice i uses seed + i).
  v1::GenerateRequest req;
  req.set_prompt(kPrompt);
  req.set_max_new_tokens(24);
  req.set_method(v1::SAMPLE);
  req.set_temperature(1.0f);
  req.set_seed(8);
  CHECK(GrpcGenerate(req).text == a["choices"][1]["text"]);

  Json streamed = body;
  streamed["stream"] = true;
  const SseStream s = StreamCompletion(streamed);
  std::vector<std::string> finish;
  std::vector<std::string> texts = StreamedTexts(s, s.chunks.at(0).at("id"), 3, &finish);
  for (int i = 0; i < 3; ++i) {
    CHECK(texts[i] == a["choices"][i]["text"]);
    CHECK(finish[i] == a["choices"][i]["finish_reason"]);
  }
}

TEST_CASE("beam search through vLLM's fields gives the gRPC API's hypotheses", "[server][openai]") {
  v1::GenerateRequest req;
  req.set_prompt(kPrompt);
  req.set_max_new_tokens(20);
  req.set_method(v1::BEAM);
  req.set_num_beams(4);
  req.set_num_return_sequences(2);
  req.set_length_penalty(0.5f);
  const GrpcAnswer grpc = GrpcGenerate(req);
  REQUIRE(grpc.hypotheses.size() == 2);

  const Json body = {{"prompt", kPrompt}, {"max_tokens", 20}, {"use_beam_search", true},
                     {"best_of", 4},      {"n", 2},           {"length_penalty", 0.5},
                     {"temperature", 0},  {"logprobs", 0}};
  const Json whole = Completion(body);
  REQUIRE(whole["choices"].size() == 2);
  for (int i = 0; i < 2; ++i) {
    CHECK(whole["choices"][i]["text"] == grpc.hypotheses[i]);
    const Json& lp = whole["choices"][i]["logprobs"];
    CHECK(lp["token_logprobs"].size() == lp["tokens"].size());
    CHECK(lp["top_logprobs"][0].is_null());  // logprobs 0: chosen tokens only
  }
  Json streamed = body;
  streamed["stream"] = true;
  const SseStream s = StreamCompletion(streamed);
  std::vector<std::string> finish;
  std::vector<std::string> texts = StreamedTexts(s, s.chunks.at(0).at("id"), 2, &finish);
  CHECK(texts[0] == grpc.hypotheses[0]);
  CHECK(texts[1] == grpc.hypotheses[1]);
  CHECK_FALSE(finish[0].empty());
  CHECK_FALSE(finish[1].empty());
}

TEST_CASE("max_tokens left out stops at the context instead of failing", "[server][openai]") {
  // 1,801 tokens of prompt and no max_tokens: the default (256) does not fit the 2,048-token
  // context, so generation ends when the context is full, as gRPC's max_new_tokens 0 does.
  std::string prompt;
  for (int i = 0; i < 450; ++i) prompt += " Once upon a time";
  v1::GenerateRequest req;
  req.set_prompt(prompt);
  req.set_ignore_eos(true);
  auto stub = NewStub(*SharedHttpServer().process);
  StreamResult grpc = RunGenerate(*stub, req);
  REQUIRE(grpc.status.ok());
  REQUIRE(grpc.last.finish_reason() == v1::CONTEXT_FULL);
  const int grpc_tokens = static_cast<int>(grpc.last.usage().generated_tokens());
  CHECK(grpc_tokens < 256);

  const Json r = Completion({{"prompt", prompt}, {"temperature", 0}, {"ignore_eos", true}});
  CHECK(r["usage"]["prompt_tokens"].get<int>() > 2048 - 256);
  CHECK(r["choices"][0]["finish_reason"] == "length");
  CHECK(r["usage"]["completion_tokens"] == grpc_tokens);
  CHECK(r["choices"][0]["text"] == grpc.text);
}

TEST_CASE("the chat page is served at /", "[server][openai][page]") {
  HttpReply page = Get(SharedHttpServer().http_port, "/");
  REQUIRE(page.status == 200);
  CHECK(page.content_type == "text/html; charset=utf-8");
  CHECK_THAT(page.body, Catch::Contains("/v1/chat/completions"));
  CHECK_THAT(page.body, Catch::Contains("AbortController"));
  // Nothing fetched from elsewhere.
  CHECK_THAT(page.body, !Catch::Contains("http://") && !Catch::Contains("https://"));
}

TEST_CASE("HTTP requests are counted in textgen_requests_total by route", "[server][openai]") {
  HttpServer& s = SharedHttpServer();
  const Exposition before = ScrapeMetrics(s.metrics_port);
  const double tokens_before = before.Get("textgen_generated_tokens_total");
  Completion({{"prompt", kPrompt}, {"max_tokens", 5}, {"temperature", 0}});
  Completion({{"prompt", kPrompt}, {"max_tokens", 5}, {"temperature", 0}});
  CHECK(Post(s.http_port, "/v1/completions", Json{{"prompt", 5}}).status == 400);
  CHECK(Get(s.http_port, "/v1/models").status == 200);
  // A request is counted once its response is written, which can be just after the client has
  // read it: wait (bounded) for the second completion to be counted.
  const Exposition e = WaitForMetrics(s.metrics_port, 5, [](const Exposition& x) {
    return x.Get("textgen_requests_total", {{"method", "/v1/completions"}, {"code", "OK"}}) >= 2 &&
           x.Get("textgen_requests_total", {{"method", "/v1/models"}, {"code", "OK"}}) >= 1;
  });
  CHECK(e.Get("textgen_requests_total", {{"method", "/v1/completions"}, {"code", "OK"}}) == 2);
  CHECK(e.Get("textgen_requests_total",
              {{"method", "/v1/completions"}, {"code", "INVALID_ARGUMENT"}}) == 1);
  CHECK(e.Get("textgen_requests_total", {{"method", "/v1/models"}, {"code", "OK"}}) == 1);
  CHECK(e.Get("textgen_generated_tokens_total") == tokens_before + 10);
  CHECK(e.Get("textgen_time_to_first_token_seconds_count") >= 2);
}

}  // namespace openai_completions_test
}  // namespace textgen::testing
