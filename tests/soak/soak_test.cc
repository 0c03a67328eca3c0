// The soak test (issue 15): one real textgen-server on loopback with two API keys, a ChatML
// template, the HTTP API and /metrics, driven by 64 concurrent clients for
// $TEXTGEN_SOAK_SECONDS (default 60) with a mix of greedy / sampled / beam Generate, Chat,
// client cancels, deadlines that expire mid-stream, sessions under both keys (the other key
// must get NOT_FOUND), one slow reader and streamed HTTP completions. It ends with every
// response well-formed, the KV pool idle and the server's RSS flat.
//
// Worker threads never call Catch macros (they are not thread-safe): they record problems as
// strings, checked on the main thread at the end.
#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/server_test_util.h"
#include "tests/support/metrics_scrape.h"

namespace textgen::testing {
namespace soak_test {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

constexpr int kClients = 64;
constexpr char kKeyA[] = "soak-key-a-0123456789abcdef";
constexpr char kKeyB[] = "soak-key-b-0123456789abcdef";

int SoakSeconds() {
  const char* v = std::getenv("TEXTGEN_SOAK_SECONDS");
  const int s = v && *v ? std::atoi(v) : 60;
  return s > 0 ? s : 60;
}

// The server's resident set in KiB (VmRSS), 0 if unreadable.
long RssKib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

// What the clients saw, shared by all workers.
struct Tally {
  std::mutex mu;
  std::map<std::string, int> outcomes;  // "scenario: outcome" -> count
  std::vector<std::string> errors;      // malformed responses / wrong statuses
  std::atomic<long> tokens{0};

  void Count(const std::string& scenario, const std::string& outcome) {
    std::lock_guard<std::mutex> l(mu);
    ++outcomes[scenario + ": " + outcome];
  }
  void Error(const std::string& scenario, const std::string& what) {
    std::lock_guard<std::mutex> l(mu);
    ++outcomes[scenario + ": ERROR"];
    if (errors.size() < 50) errors.push_back(scenario + ": " + what);
  }
};

std::string CodeName(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    default:
      return "code " + std::to_string(static_cast<int>(c));
  }
}

// One streamed call as the client saw it.
struct Stream {
  grpc::Status status;
  std::vector<v1::GenerateResponse> messages;
  long tokens = 0;
};

// Reads a stream to its end. `cancel_after_ms` > 0: TryCancel once that long has passed (checked
// between messages; an endless stream keeps them coming). `read_delay_ms`: the slow reader's
// pause before each read.
template <typename Req>
Stream RunStream(v1::TextGeneration::Stub& stub, bool chat, const Req& req, const char* key,
                 int deadline_ms, int cancel_after_ms = 0, int read_delay_ms = 0) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", std::string("Bearer ") + key);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  ctx.set_wait_for_ready(true);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader;
  if constexpr (std::is_same_v<Req, v1::ChatRequest>) {
    reader = stub.Chat(&ctx, req);
  } else {
    reader = stub.Generate(&ctx, req);
  }
  (void)chat;
  Stream s;
  const auto start = Clock::now();
  bool cancelled = false;
  v1::GenerateResponse msg;
  while (true) {
    if (read_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(read_delay_ms));
    if (!reader->Read(&msg)) break;
    s.tokens += msg.tokens_size();
    s.messages.push_back(msg);
    if (cancel_after_ms > 0 && !cancelled &&
        Clock::now() - start >= std::chrono::milliseconds(cancel_after_ms)) {
      ctx.TryCancel();
      cancelled = true;
    }
  }
  s.status = reader->Finish();
  return s;
}

// A stream that finished OK: every message but the last without a finish_reason, the last with
// one and with usage; the usage counts the streamed tokens (beam search streams none).
std::string CheckComplete(const Stream& s, bool beam, uint32_t max_new_tokens) {
  if (!s.status.ok()) {
    return "status " + CodeName(s.status.error_code()) + ": " + s.status.error_message();
  }
  if (s.messages.empty()) return "OK without messages";
  for (size_t i = 0; i + 1 < s.messages.size(); ++i) {
    if (s.messages[i].finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      return "finish_reason on message " + std::to_string(i) + " of " +
             std::to_string(s.messages.size());
    }
    if (s.messages[i].has_usage()) return "usage before the last message";
  }
  const v1::GenerateResponse& last = s.messages.back();
  if (last.finish_reason() == v1::FINISH_REASON_UNSPECIFIED) return "no finish_reason at the end";
  if (last.finish_reason() == v1::CANCELLED) return "finish_reason CANCELLED without a cancel";
  if (!last.has_usage()) return "no usage on the last message";
  const uint32_t gen = last.usage().generated_tokens();
  if (gen == 0 || gen > max_new_tokens) return "generated_tokens " + std::to_string(gen);
  if (beam) {
    if (last.hypotheses_size() < 1) return "beam search without hypotheses";
  } else if (static_cast<long>(gen) != s.tokens) {
    return "usage says " + std::to_string(gen) + " tokens, streamed " + std::to_string(s.tokens);
  }
  if (last.finish_reason() == v1::LENGTH && gen != max_new_tokens) {
    return "LENGTH after " + std::to_string(gen) + " of " + std::to_string(max_new_tokens);
  }
  return "";
}

// A stream cut short by a cancel or deadline: that status (or OK if it finished first), and no
// message after a final one.
std::string CheckCut(const Stream& s, grpc::StatusCode want) {
  for (size_t i = 0; i + 1 < s.messages.size(); ++i) {
    if (s.messages[i].finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      return "a message after the final one";
    }
  }
  if (s.status.error_code() == want) return "";
  return "status " + CodeName(s.status.error_code()) + " (wanted " + CodeName(want) +
         "): " + s.status.error_message();
}

grpc::Status CreateSession(v1::TextGeneration::Stub& stub, const char* key, std::string* id) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", std::string("Bearer ") + key);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::Session session;
  grpc::Status st = stub.CreateSession(&ctx, v1::CreateSessionRequest(), &session);
  *id = session.session_id();
  return st;
}

grpc::Status DeleteSession(v1::TextGeneration::Stub& stub, const char* key, const std::string& id) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", std::string("Bearer ") + key);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::DeleteSessionRequest req;
  req.set_session_id(id);
  v1::DeleteSessionResponse resp;
  return stub.DeleteSession(&ctx, req, &resp);
}

const char* const kPrompts[] = {"Once upon a time", "The little dog", "Lily and Tom went",
                                "One day, a bird", "The sun was"};

// A streamed /v1/completions: 200, "data: {json}" events, exactly one finish_reason, [DONE].
std::string CheckHttpCompletion(int port, const char* key, const std::string& prompt, int max,
                                long* tokens) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(120));
  client.set_connection_timeout(std::chrono::seconds(30));
  httplib::Headers headers = {{"Authorization", std::string("Bearer ") + key}};
  Json body = {{"prompt", prompt}, {"max_tokens", max}, {"stream", true}, {"temperature", 0}};
  auto r = client.Post("/v1/completions", headers, body.dump(), "application/json");
  if (!r) return "no response: " + httplib::to_string(r.error());
  if (r->status != 200) return "HTTP " + std::to_string(r->status) + ": " + r->body;
  const std::string& text = r->body;
  size_t pos = 0;
  bool done = false;
  int finishes = 0;
  while (pos < text.size()) {
    const size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) return "an unterminated event";
    const std::string event = text.substr(pos, end - pos);
    pos = end + 2;
    if (event.rfind("data: ", 0) != 0) return "not a data event: " + event;
    if (done) return "an event after [DONE]";
    const std::string data = event.substr(6);
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    Json j = Json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.contains("choices")) return "a bad chunk: " + data;
    for (const Json& c : j["choices"]) {
      if (c.contains("finish_reason") && !c["finish_reason"].is_null()) ++finishes;
      if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty()) {
        ++*tokens;  // text pieces, a lower bound on tokens
      }
    }
  }
  if (!done) return "no [DONE]";
  if (finishes != 1) return std::to_string(finishes) + " finish_reasons";
  return "";
}

struct Soak {
  std::unique_ptr<ServerProcess> server;
  int http_port = 0;
  int metrics_port = 0;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  Tally tally;
  Clock::time_point end;

  // One client's loop until `end`: client 0 is the slow reader, the others pick scenarios.
  void Client(int index) {
    std::mt19937 rng(1234 + index);
    auto stub = v1::TextGeneration::NewStub(channels[index % channels.size()]);
    const char* key = index % 2 == 0 ? kKeyA : kKeyB;
    const char* other = index % 2 == 0 ? kKeyB : kKeyA;
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    while (Clock::now() < end) {
      const std::string prompt = kPrompts[uniform(0, 4)];
      if (index == 0) {
        v1::GenerateRequest req;
        req.set_prompt(prompt);
        req.set_max_new_tokens(96);
        req.set_ignore_eos(true);
        Stream s = RunStream(*stub, false, req, key, 180000, 0, 60);
        Record("slow reader", s, CheckComplete(s, false, 96));
        continue;
      }
      const int scenario = uniform(0, 9);
      if (scenario <= 1) {  // greedy or sampled Generate
        v1::GenerateRequest req;
        req.set_prompt(prompt);
        const uint32_t max = static_cast<uint32_t>(uniform(1, 64));
        req.set_max_new_tokens(max);
        const bool sample = scenario == 1;
        if (sample) {
          req.set_method(v1::SAMPLE);
          req.set_temperature(0.8f);
          req.set_top_k(40);
          req.set_seed(static_cast<uint64_t>(uniform(0, 1 << 30)));
        }
        Stream s = RunStream(*stub, false, req, key, 120000);
        Record(sample ? "sample" : "greedy", s, CheckComplete(s, false, max));
      } else if (scenario == 2) {  // beam search
        v1::GenerateRequest req;
        req.set_prompt(prompt);
        const uint32_t max = static_cast<uint32_t>(uniform(4, 24));
        req.set_max_new_tokens(max);
        req.set_method(v1::BEAM);
        req.set_num_beams(static_cast<uint32_t>(uniform(2, 4)));
        Stream s = RunStream(*stub, false, req, key, 120000);
        Record("beam", s, CheckComplete(s, true, max));
      } else if (scenario == 3) {  // Chat through the ChatML template
        v1::ChatRequest req;
        auto* sys = req.add_messages();
        sys->set_role("system");
        sys->set_content("You tell short stories.");
        auto* user = req.add_messages();
        user->set_role("user");
        user->set_content(prompt);
        const uint32_t max = static_cast<uint32_t>(uniform(1, 48));
        req.set_max_new_tokens(max);
        Stream s = RunStream(*stub, true, req, key, 120000);
        Record("chat", s, CheckComplete(s, false, max));
      } else if (scenario == 4) {  // a client cancel mid-stream
        v1::GenerateRequest req = EndlessRequest();
        req.set_prompt(prompt);
        Stream s = RunStream(*stub, false, req, key, 120000, uniform(20, 1500));
        Record("cancel", s, CheckCut(s, grpc::StatusCode::CANCELLED));
      } else if (scenario == 5) {  // a deadline that expires mid-stream
        v1::GenerateRequest req = EndlessRequest();
        req.set_prompt(prompt);
        Stream s = RunStream(*stub, false, req, key, uniform(100, 2000));
        Record("deadline", s, CheckCut(s, grpc::StatusCode::DEADLINE_EXCEEDED));
      } else if (scenario <= 7) {
        SessionScenario(*stub, key, other, rng);
      } else {  // streamed HTTP completion
        long tokens = 0;
        std::string err = CheckHttpCompletion(http_port, key, prompt, uniform(1, 32), &tokens);
        tally.tokens += tokens;
        if (err.empty()) {
          tally.Count("http", "OK");
        } else {
          tally.Error("http", err);
        }
      }
    }
  }

  void Record(const std::string& scenario, const Stream& s, const std::string& err) {
    tally.tokens += s.tokens;
    if (err.empty()) {
      tally.Count(scenario, CodeName(s.status.error_code()));
    } else {
      tally.Error(scenario, err);
    }
  }

  // Create a session, run 2-3 turns (the later ones reuse the cached prefix; one is sometimes
  // cancelled), check the other key cannot see it, delete it.
  void SessionScenario(v1::TextGeneration::Stub& stub, const char* key, const char* other,
                       std::mt19937& rng) {
    std::string id;
    grpc::Status st = CreateSession(stub, key, &id);
    if (!st.ok()) {
      tally.Error("session", "CreateSession: " + CodeName(st.error_code()));
      return;
    }
    const int turns = std::uniform_int_distribution<int>(2, 3)(rng);
    for (int t = 0; t < turns; ++t) {
      v1::GenerateRequest req;
      req.set_prompt(t == 0 ? "Once upon a time" : " and then");
      const uint32_t max = static_cast<uint32_t>(std::uniform_int_distribution<int>(4, 24)(rng));
      req.set_max_new_tokens(max);
      req.set_session_id(id);
      Stream s = RunStream(stub, false, req, key, 120000);
      std::string err = CheckComplete(s, false, max);
      if (err.empty() && t > 0 && s.messages.back().usage().cached_tokens() == 0) {
        err = "turn " + std::to_string(t + 1) + " reused no cached tokens";
      }
      Record("session turn", s, err);
      if (!err.empty()) break;
    }
    // The other key: the session does not exist.
    v1::GenerateRequest peek;
    peek.set_prompt(" then");
    peek.set_max_new_tokens(2);
    peek.set_session_id(id);
    Stream s = RunStream(stub, false, peek, other, 60000);
    if (s.status.error_code() == grpc::StatusCode::NOT_FOUND && s.messages.empty()) {
      tally.Count("session other key", "NOT_FOUND");
    } else {
      tally.Error("session other key", "got " + CodeName(s.status.error_code()));
    }
    st = DeleteSession(stub, other, id);
    if (st.error_code() != grpc::StatusCode::NOT_FOUND) {
      tally.Error("session other key", "delete got " + CodeName(st.error_code()));
    }
    st = DeleteSession(stub, key, id);
    if (st.ok()) {
      tally.Count("session delete", "OK");
    } else {
      tally.Error("session delete", CodeName(st.error_code()) + ": " + st.error_message());
    }
  }
};

uint32_t FreeBlocks(v1::TextGeneration::Stub& stub, uint32_t* total) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", std::string("Bearer ") + kKeyA);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ModelInfo info;
  grpc::Status st = stub.GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
  if (!st.ok()) return 0;
  *total = info.kv_blocks_total();
  return info.kv_blocks_free();
}

TEST_CASE("soak: 64 mixed streams end with the KV pool idle and the RSS flat", "[soak]") {
  const int seconds = SoakSeconds();
  const std::string dir = ScratchDir();
  const std::string keys_file = dir + "/api-keys";
  WriteFile(keys_file, std::string(kKeyA) + " alice\n" + kKeyB + " bob\n");

  Soak soak;
  soak.http_port = PickFreePort();
  soak.metrics_port = PickFreePort();
  ServerProcessOptions o;
  o.extra_args = {
      "--api-keys-file",      keys_file,
      "--chat-template",      ChatTemplatesDir() + "/templates/Qwen-Qwen2.5-7B-Instruct.jinja",
      "--http-listen",        "127.0.0.1:" + std::to_string(soak.http_port),
      "--metrics-listen",     "127.0.0.1:" + std::to_string(soak.metrics_port),
      "--max-max-new-tokens", std::to_string(kEndless),
      "--log-level",          "warn"};  // the prefix cache on (default)
  soak.server = std::make_unique<ServerProcess>(o);
  for (int i = 0; i < 8; ++i) soak.channels.push_back(soak.server->NewChannel());
  auto stub = v1::TextGeneration::NewStub(soak.server->channel());
  uint32_t total = 0;
  const uint32_t free_at_start = FreeBlocks(*stub, &total);
  REQUIRE(total > 0);
  REQUIRE(free_at_start == total);

  const auto start = Clock::now();
  soak.end = start + std::chrono::seconds(seconds);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) clients.emplace_back([&soak, i] { soak.Client(i); });

  // RSS every twentieth of the run, less the KV pool's pages in memory as the server reports
  // them: with the prefix cache on, freed blocks stay cached and new ones keep coming from
  // untouched pool pages until the whole pool (1 GiB here) has been used once, so the raw RSS
  // measures the pool (+41 MiB in 60 s), not the heap. The one at 25% is the baseline
  // (allocator arenas, gRPC and HTTP worker threads have grown by then).
  std::vector<std::pair<int, long>> rss;   // (percent, KiB less the pool's)
  std::vector<std::pair<int, long>> pool;  // (percent, KiB of the pool in memory)
  for (int pct = 10; pct <= 100; pct += 5) {
    std::this_thread::sleep_until(start + std::chrono::milliseconds(seconds * 10 * pct));
    // Pool first: it only grows, so RSS read after it can only overstate the heap's share.
    const double pool_bytes =
        ScrapeMetrics(soak.metrics_port).Get("textgen_kv_pool_resident_bytes");
    const long all = RssKib(soak.server->pid());
    pool.emplace_back(pct, static_cast<long>(pool_bytes / 1024));
    rss.emplace_back(pct, all - pool.back().second);
  }
  for (auto& t : clients) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  // Every stream has ended and every session is deleted: the pool must come back whole.
  uint32_t free_at_end = 0;
  for (int i = 0; i < 500 && free_at_end != total; ++i) {
    free_at_end = FreeBlocks(*stub, &total);
    if (free_at_end != total) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const Exposition metrics = ScrapeMetrics(soak.metrics_port);
  const long rss_end = RssKib(soak.server->pid());

  long rss25 = 0, rss100 = 0;
  std::ostringstream out;
  out << "soak: " << kClients << " clients for " << elapsed << " s, " << soak.tally.tokens
      << " tokens streamed\n";
  for (const auto& [name, n] : soak.tally.outcomes) out << "  " << name << ": " << n << "\n";
  out << "  RSS less the KV pool's pages (MiB) by % of the run:";
  for (const auto& [pct, kib] : rss) {
    out << " " << pct << "%=" << kib / 1024;
    if (pct == 25) rss25 = kib;
    if (pct == 100) rss100 = kib;
  }
  out << " after (whole RSS)=" << rss_end / 1024 << "\n  KV pool in memory (MiB):";
  for (const auto& [pct, kib] : pool) out << " " << pct << "%=" << kib / 1024;
  out << "\n";
  out << "  KV blocks free " << free_at_end << " / " << total << " (metrics: free "
      << metrics.Get("textgen_kv_blocks", {{"state", "free"}}) << ", used "
      << metrics.Get("textgen_kv_blocks", {{"state", "used"}}) << ", sessions "
      << metrics.Get("textgen_sessions") << ", active " << metrics.Get("textgen_active_requests")
      << ", queued " << metrics.Get("textgen_queue_depth") << ")\n";
  for (const auto& e : soak.tally.errors) out << "  ERROR " << e << "\n";
  std::fputs(out.str().c_str(), stdout);
  std::fflush(stdout);
  INFO(out.str());

  CHECK(soak.tally.errors.empty());
  // Every kind of stream ran at least once.
  for (const char* want :
       {"greedy: OK", "sample: OK", "beam: OK", "chat: OK", "cancel: CANCELLED",
        "deadline: DEADLINE_EXCEEDED", "session turn: OK", "session other key: NOT_FOUND",
        "session delete: OK", "http: OK", "slow reader: OK"}) {
    INFO(want);
    CHECK(soak.tally.outcomes[want] > 0);
  }
  CHECK(free_at_end == total);
  CHECK(metrics.Get("textgen_kv_blocks", {{"state", "free"}}) == total);
  CHECK(metrics.Get("textgen_kv_blocks", {{"state", "used"}}) == 0);
  CHECK(metrics.Get("textgen_sessions") == 0);
  CHECK(metrics.Get("textgen_active_requests") == 0);
  CHECK(metrics.Get("textgen_queue_depth") == 0);
  // RSS flat: from 25% to 100% of the run the RSS less the KV pool's resident pages may grow by
  // at most 15% or 24 MiB, whichever is larger. The weights are mapped up front and the pool's
  // growth is subtracted exactly (the server's mincore count); what can still move is malloc's
  // arenas and gRPC's buffers, which do most of their growing in the first quarter. A leak of even
  // a few KiB per request (thousands of requests) breaks the bound. Measured (2 shared cores): 60 s
  // ~68 -> ~73 MiB; 240 s 76 -> 93 MiB, slowing down (86 -> 93 in the second half). malloc_stats()
  // showed the heap in use flat (12.3 MB at 123 s, 12.2 MB at 223 s) while glibc's arenas kept
  // growing (47.6 -> 55.9 MB): retained free memory, not a leak (heaptrack found none either).
  REQUIRE(rss25 > 0);
  REQUIRE(rss100 > 0);
#if defined(__SANITIZE_ADDRESS__)
  // Under ASan freed memory sits in the quarantine (256 MiB by default), so the RSS grows by
  // design; LeakSanitizer checks the server at exit instead (Stop() below fails on a leak).
#else
  CHECK(rss100 - rss25 <= std::max<long>(rss25 * 15 / 100, 24 * 1024));
#endif
  CHECK(soak.server->Stop() == 0);
}

}  // namespace soak_test
}  // namespace textgen::testing
