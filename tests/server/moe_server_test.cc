// Mixture-of-experts models through the whole server, unchanged: greedy generation follows
// llama.cpp's reference, sessions continue from their cache as a whole conversation would,
// beam search and seeded sampling run, and the OpenAI HTTP API gives the gRPC API's tokens
// (../shared/models/moe; --compute f32, where the greedy ids are exact).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/server/openai_test_util.h"
#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace moe_server_test {

std::vector<int32_t> BestIds(const StreamResult& r) {
  REQUIRE(r.last.hypotheses_size() > 0);
  return {r.last.hypotheses(0).ids().begin(), r.last.hypotheses(0).ids().end()};
}

std::string CreateSession(v1::TextGeneration::Stub& stub) {
  grpc::ClientContext ctx;
  v1::CreateSessionRequest req;
  v1::Session session;
  REQUIRE(stub.CreateSession(&ctx, req, &session).ok());
  return session.session_id();
}

TEST_CASE("mixture-of-experts models serve greedy, sessions, beams, sampling and HTTP",
          "[server][moe]") {
  for (const char* name : {"qwen3moe", "mixtral", "qwen2moe"}) {
    SECTION(name) {
      std::unique_ptr<HttpServer> server =
          StartHttpServer({"--compute", "f32"}, ModelPath(std::string("moe/") + name + ".gguf"));
      auto stub = NewStub(*server->process);
      int n_predict = 0;
      const std::vector<ReferenceCase> ref =
          LoadReference(&n_predict, std::string("moe/") + name + ".greedy.json");

      // Greedy: llama.cpp's ids, streamed.
      v1::GenerateRequest greedy;
      greedy.mutable_prompt_ids()->Add(ref[1].prompt_ids.begin(), ref[1].prompt_ids.end());
      greedy.set_max_new_tokens(n_predict);
      const StreamResult g = RunGenerate(*stub, greedy);
      REQUIRE(g.status.ok());
      CHECK(g.ids == ref[1].generated_ids);

      // A session's second turn equals the whole conversation sent at once.
      const std::string id = CreateSession(*stub);
      v1::GenerateRequest turn1;
      turn1.set_session_id(id);
      turn1.mutable_prompt_ids()->Add(ref[0].prompt_ids.begin(), ref[0].prompt_ids.end());
      turn1.set_max_new_tokens(12);
      const StreamResult t1 = RunGenerate(*stub, turn1);
      REQUIRE(t1.status.ok());
      v1::GenerateRequest turn2;
      turn2.set_session_id(id);
      turn2.mutable_prompt_ids()->Add(ref[2].prompt_ids.begin() + 1, ref[2].prompt_ids.end());
      turn2.set_max_new_tokens(12);
      const StreamResult t2 = RunGenerate(*stub, turn2);
      REQUIRE(t2.status.ok());
      CHECK(t2.last.usage().cached_tokens() > 0);
      std::vector<int32_t> whole = ref[0].prompt_ids;
      whole.insert(whole.end(), t1.ids.begin(), t1.ids.end());
      whole.insert(whole.end(), ref[2].prompt_ids.begin() + 1, ref[2].prompt_ids.end());
      v1::GenerateRequest plain;
      plain.mutable_prompt_ids()->Add(whole.begin(), whole.end());
      plain.set_max_new_tokens(12);
      const StreamResult p = RunGenerate(*stub, plain);
      REQUIRE(p.status.ok());
      CHECK(p.ids == t2.ids);

      // Beam search (3 beams) returns ranked hypotheses.
      v1::GenerateRequest beam = greedy;
      beam.set_max_new_tokens(16);
      beam.set_num_beams(3);
      beam.set_num_return_sequences(3);
      const StreamResult b = RunGenerate(*stub, beam);
      REQUIRE(b.status.ok());
      REQUIRE(b.last.hypotheses_size() == 3);
      CHECK(b.last.hypotheses(0).score() >= b.last.hypotheses(2).score());

      // Seeded sampling is reproducible.
      v1::GenerateRequest sample = greedy;
      sample.set_max_new_tokens(24);
      sample.set_temperature(1.0f);
      sample.set_seed(42);
      const StreamResult s1 = RunGenerate(*stub, sample);
      const StreamResult s2 = RunGenerate(*stub, sample);
      REQUIRE(s1.status.ok());
      REQUIRE(s2.status.ok());
      CHECK(s1.ids == s2.ids);
      CHECK(s1.ids.size() == 24);

      // The OpenAI completions endpoint: the gRPC API's greedy text.
      v1::GenerateRequest text_req;
      text_req.set_prompt(ref[3].prompt);
      text_req.set_max_new_tokens(20);
      const StreamResult tg = RunGenerate(*stub, text_req);
      REQUIRE(tg.status.ok());
      const HttpReply http =
          Post(server->http_port, "/v1/completions",
               Json{{"prompt", ref[3].prompt}, {"max_tokens", 20}, {"temperature", 0}});
      REQUIRE(http.status == 200);
      CHECK(http.json.at("choices")[0].at("text") == tg.text);
    }
  }
}

}  // namespace moe_server_test
}  // namespace textgen::testing
