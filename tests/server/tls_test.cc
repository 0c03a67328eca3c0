// TLS (--tls-cert, --tls-key) on the gRPC, HTTP API and metrics listeners, and mutual TLS
// (--tls-client-ca): what clients that do it right get, and what the wrong ones get (plain text
// on a TLS port, an untrusted or expired certificate, no client certificate).
#include <signal.h>

#include <catch2/catch.hpp>
#include <string>

#include "tests/server/openai_test_util.h"
#include "tests/server/server_test_util.h"
#include "tests/server/tls_test_util.h"

namespace textgen::testing {
namespace tls_test {

grpc::Status ModelInfo(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::TextGeneration::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ModelInfo info;
  return stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
}

// An HTTPS GET verifying the server against `ca`, with a client certificate when given.
httplib::Result HttpsGet(int port, const std::string& path, const std::string& ca,
                         const std::string& cert = "", const std::string& key = "") {
  // A server that ends a failed handshake closes the socket under httplib's next write.
  ::signal(SIGPIPE, SIG_IGN);
  auto client = cert.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", port)
                             : std::make_unique<httplib::SSLClient>("127.0.0.1", port, cert, key);
  client->set_ca_cert_path(ca.c_str());
  client->enable_server_certificate_verification(true);
  client->set_connection_timeout(std::chrono::seconds(10));
  client->set_read_timeout(std::chrono::seconds(10));
  return client->Get(path.c_str());
}

TEST_CASE("TLS serves the gRPC API, the HTTP API and metrics, plain text and strangers fail",
          "[server][tls]") {
  TestCerts c = MakeTestCerts();
  auto s = StartTlsServer(c);
  const std::string address = s->process->address();
  CHECK(ModelInfo(NewTestChannel(address, TlsCredentials(c.server_cert))).ok());
  v1::GenerateRequest req;
  req.set_prompt("Once upon a time");
  req.set_max_new_tokens(4);
  CHECK(RunGenerate(*NewStub(*s->process), req).status.ok());

  // A plain-text client on the TLS port, and a client that trusts another CA: no connection.
  CHECK(ModelInfo(NewTestChannel(address)).error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(ModelInfo(NewTestChannel(address, TlsCredentials(c.stranger_cert))).error_code() ==
        grpc::StatusCode::UNAVAILABLE);

  auto models = HttpsGet(s->http_port, "/v1/models", c.server_cert);
  REQUIRE(models);
  CHECK(models->status == 200);
  auto metrics = HttpsGet(s->metrics_port, "/metrics", c.server_cert);
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  CHECK(!HttpsGet(s->http_port, "/v1/models", c.stranger_cert));
  // Plain HTTP to the HTTPS ports gets no HTTP answer.
  for (int port : {s->http_port, s->metrics_port}) {
    httplib::Client plain("127.0.0.1", port);
    plain.set_read_timeout(std::chrono::seconds(2));
    auto r = plain.Get("/metrics");
    CHECK((!r || r->status >= 400));
  }
  // The server is unharmed by all of it.
  CHECK(ModelInfo(s->process->channel()).ok());
  CHECK_THAT(s->process->Log(), Catch::Contains("TLS"));

  // textgen-client with --tls-ca (and without: plain text, refused).
  const std::string client = std::string(std::getenv("TEXTGEN_BIN_DIR")) + "/textgen-client";
  CommandResult ok = RunCommand(client + " info --server " + address + " --tls-ca " +
                                ShellQuote(c.server_cert) + " 2>&1");
  INFO(ok.out);
  CHECK(ok.exit_code == 0);
  CommandResult plain = RunCommand(client + " info --timeout 3 --server " + address + " 2>&1");
  CHECK(plain.exit_code == 1);
  // The certificate is for localhost (and 127.0.0.1), not for another name.
  const std::string named = client + " health --timeout 20 --server " + address + " --tls-ca " +
                            ShellQuote(c.server_cert) + " --tls-server-name ";
  CHECK(RunCommand(named + "localhost 2>&1").exit_code == 0);
  CHECK(RunCommand(named + "textgen.example.com 2>&1").exit_code != 0);
}

TEST_CASE("mutual TLS refuses clients without a certificate the client CA signed",
          "[server][tls]") {
  TestCerts c = MakeTestCerts();
  auto s = StartTlsServer(c, {"--tls-client-ca", c.client_ca}, c.client_cert, c.client_key);
  const std::string address = s->process->address();
  CHECK(
      ModelInfo(NewTestChannel(address, TlsCredentials(c.server_cert, c.client_cert, c.client_key)))
          .ok());
  CHECK(ModelInfo(NewTestChannel(address, TlsCredentials(c.server_cert))).error_code() ==
        grpc::StatusCode::UNAVAILABLE);
  // Expired, or signed by no CA the server trusts (the server's own certificate).
  CHECK(ModelInfo(NewTestChannel(address, TlsCredentials(c.server_cert, c.expired_client_cert,
                                                         c.expired_client_key)))
            .error_code() == grpc::StatusCode::UNAVAILABLE);

  auto with_cert = HttpsGet(s->http_port, "/v1/models", c.server_cert, c.client_cert, c.client_key);
  REQUIRE(with_cert);
  CHECK(with_cert->status == 200);
  CHECK(!HttpsGet(s->http_port, "/v1/models", c.server_cert));
  CHECK(!HttpsGet(s->metrics_port, "/metrics", c.server_cert));

  const std::string client = std::string(std::getenv("TEXTGEN_BIN_DIR")) + "/textgen-client";
  const std::string base =
      client + " info --timeout 20 --server " + address + " --tls-ca " + ShellQuote(c.server_cert);
  CHECK(RunCommand(base + " --tls-cert " + ShellQuote(c.client_cert) + " --tls-key " +
                   ShellQuote(c.client_key) + " 2>&1")
            .exit_code == 0);
  CHECK(RunCommand(base + " 2>&1").exit_code == 1);
}

TEST_CASE("unusable TLS files stop the start naming the flag", "[server][tls]") {
  TestCerts c = MakeTestCerts();
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  const std::string base = std::string(bin_dir) + "/textgen-server --model " +
                           ShellQuote(ModelPath("stories260K.gguf")) + " --listen 127.0.0.1:0 ";
  struct Case {
    std::string args;
    std::string says;
  };
  for (const Case& k : std::vector<Case>{
           {"--tls-cert " + c.expired_cert + " --tls-key " + c.server_key, "expired"},
           {"--tls-cert " + c.server_cert + " --tls-key " + c.client_key,
            "--tls-key: " + c.client_key + " is not the private key"},
           {"--tls-cert " + c.server_cert, "--tls-cert and --tls-key must be given together"},
           {"--tls-cert " + c.dir + "/missing.pem --tls-key " + c.server_key, "--tls-cert"},
           {"--tls-cert " + c.server_key + " --tls-key " + c.server_key, "no PEM certificate"},
           {"--tls-client-ca " + c.client_ca, "--tls-client-ca needs --tls-cert"},
       }) {
    CommandResult r = RunCommand(base + k.args + " 2>&1");
    INFO(k.args << "\n" << r.out);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.out, Catch::Contains(k.says));
  }
}

TEST_CASE("a listener other hosts can reach without TLS or keys is warned about",
          "[server][tls][auth]") {
  ServerProcessOptions o;
  o.extra_args = {"--http-listen", "0.0.0.0:" + std::to_string(PickFreePort())};
  ServerProcess open(o);
  CHECK_THAT(open.Log(), Catch::Contains("--http-listen 0.0.0.0:"));
  CHECK_THAT(open.Log(), Catch::Contains("without TLS"));
  CHECK_THAT(open.Log(), Catch::Contains("without API keys"));
  // Loopback only (the gRPC listener here): no warning.
  CHECK_THAT(open.Log(), !Catch::Contains("--listen 127.0.0.1"));

  TestCerts c = MakeTestCerts();
  auto closed = StartTlsServer(c, {"--api-keys-file", c.keys_file, "--http-listen",
                                   "0.0.0.0:" + std::to_string(PickFreePort())});
  CHECK_THAT(closed->process->Log(), !Catch::Contains("reachable from other hosts"));
}

}  // namespace tls_test
}  // namespace textgen::testing
