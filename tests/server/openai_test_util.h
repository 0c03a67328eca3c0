// Helpers for the end-to-end tests of the OpenAI-compatible HTTP API (header-only, like
// server_test_util.h): a server with --http-listen, JSON requests over cpp-httplib, and a strict
// reader of server-sent event streams.
#ifndef TEXTGEN_TESTS_SERVER_OPENAI_TEST_UTIL_H_
#define TEXTGEN_TESTS_SERVER_OPENAI_TEST_UTIL_H_

#include <httplib.h>

#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/server/server_test_util.h"

namespace textgen::testing {

using Json = nlohmann::json;

// A textgen-server with the HTTP API on http_port.
struct HttpServer {
  int http_port = 0;
  int metrics_port = 0;
  std::unique_ptr<ServerProcess> process;
};

inline std::unique_ptr<HttpServer> StartHttpServer(std::vector<std::string> extra_args = {},
                                                   const std::string& model = "") {
  auto s = std::make_unique<HttpServer>();
  s->http_port = PickFreePort();
  // Two picks can return the same free port (nothing holds it in between).
  do {
    s->metrics_port = PickFreePort();
  } while (s->metrics_port == s->http_port);
  ServerProcessOptions o;
  o.model = model;
  o.extra_args = {"--http-listen", "127.0.0.1:" + std::to_string(s->http_port), "--metrics-listen",
                  "127.0.0.1:" + std::to_string(s->metrics_port)};
  o.extra_args.insert(o.extra_args.end(), extra_args.begin(), extra_args.end());
  s->process = std::make_unique<ServerProcess>(o);
  return s;
}

// One server per test process (ctest runs each test case in its own process). Prefix cache
// off: its tests send a gRPC request and the same one over HTTP and compare logprobs to 1e-6;
// served from the first's cached rows, the second runs the rest in another batch shape, which
// moves the default (bf16) compute's logprobs by ~1e-6. The cache's exactness is tested under
// --compute f32 (prefix_cache_test.cc).
inline HttpServer& SharedHttpServer() {
  static std::unique_ptr<HttpServer> server = StartHttpServer({"--prefix-cache", "off"});
  return *server;
}

struct HttpReply {
  int status = 0;  // 0: no response (connection failed)
  std::string body;
  std::string content_type;
  Json json;  // the body parsed, when it is JSON
};

inline HttpReply ToReply(const httplib::Result& r) {
  HttpReply out;
  if (!r) return out;
  out.status = r->status;
  out.body = r->body;
  out.content_type = r->get_header_value("Content-Type");
  out.json = Json::parse(out.body, nullptr, false);
  return out;
}

inline HttpReply Post(int port, const std::string& path, const std::string& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(60));
  return ToReply(client.Post(path, body, "application/json"));
}

inline HttpReply Post(int port, const std::string& path, const Json& body) {
  return Post(port, path, body.dump());
}

inline HttpReply Get(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  return ToReply(client.Get(path));
}

// A server-sent event stream as OpenAI sends it: "data: <json>\n\n" events, then
// "data: [DONE]\n\n". FAILs the test on anything else (other lines, text after [DONE]).
struct SseStream {
  std::vector<Json> chunks;
  bool done = false;  // ended with [DONE]
};

inline SseStream ParseSse(const std::string& body) {
  SseStream s;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    REQUIRE(end != std::string::npos);
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    REQUIRE(event.rfind("data: ", 0) == 0);
    REQUIRE(event.find('\n') == std::string::npos);
    REQUIRE_FALSE(s.done);
    const std::string data = event.substr(6);
    if (data == "[DONE]") {
      s.done = true;
      continue;
    }
    Json j = Json::parse(data, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    s.chunks.push_back(std::move(j));
  }
  return s;
}

// The OpenAI error body's fields, checked to have the documented shape.
inline Json ErrorOf(const HttpReply& r) {
  INFO(r.body);
  REQUIRE(r.json.is_object());
  REQUIRE(r.json.contains("error"));
  const Json& e = r.json["error"];
  REQUIRE(e.at("message").is_string());
  REQUIRE(e.at("type").is_string());
  REQUIRE(e.contains("param"));
  REQUIRE(e.contains("code"));
  return e;
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_SERVER_OPENAI_TEST_UTIL_H_
