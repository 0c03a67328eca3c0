// Throwaway certificates for the TLS tests, made with the openssl command at test time (no key
// is ever committed): a server certificate for 127.0.0.1 / localhost that is its own CA, an
// expired one with the same key, a stranger CA clients must not trust, and a client CA with a
// valid and an expired client certificate for mutual TLS.
#ifndef TEXTGEN_TESTS_SERVER_TLS_TEST_UTIL_H_
#define TEXTGEN_TESTS_SERVER_TLS_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/server/openai_test_util.h"
#include "tests/test_util.h"

namespace textgen::testing {

struct TestCerts {
  std::string dir;
  std::string server_cert, server_key;  // self-signed, valid for two days
  std::string expired_cert;             // server_key's, expired yesterday
  std::string stranger_cert;            // an unrelated self-signed CA
  std::string client_ca, client_cert, client_key, expired_client_cert, expired_client_key;
  std::string keys_file;  // API keys: alice (two keys), bob, and one without a name

  static constexpr char kAliceKey[] = "alice-key-0123456789abcdef";
  static constexpr char kAliceKey2[] = "alice-key-fedcba9876543210";
  static constexpr char kBobKey[] = "bob-key-0123456789abcdef01";
  static constexpr char kNamelessKey[] = "nameless-key-0123456789abc";
};

// Runs an openssl command in `dir`, REQUIREing success (its output in the failure message).
inline void OpenSsl(const std::string& dir, const std::string& args) {
  CommandResult r = RunCommand("cd " + ShellQuote(dir) + " && openssl " + args + " 2>&1");
  INFO("openssl " << args << "\n" << r.out);
  REQUIRE(r.exit_code == 0);
}

// Self-signed ECDSA P-256 certificate and key named NAME.pem / NAME.key.
inline void SelfSigned(const std::string& dir, const std::string& name, const std::string& cn,
                       const std::string& extra = "") {
  OpenSsl(dir, "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + name +
                   ".key -out " + name + ".pem -days 2 -subj /CN=" + cn + " " + extra);
}

inline TestCerts MakeTestCerts() {
  TestCerts c;
  c.dir = ScratchDir();
  const std::string& d = c.dir;
  SelfSigned(d, "server", "localhost", "-addext subjectAltName=IP:127.0.0.1,DNS:localhost");
  OpenSsl(d, "req -new -key server.key -subj /CN=localhost -out server.csr");
  // A negative validity ends before it starts: expired since yesterday.
  OpenSsl(d, "x509 -req -in server.csr -signkey server.key -days -1 -out expired.pem");
  SelfSigned(d, "stranger", "stranger");
  SelfSigned(d, "client-ca", "textgen-test-client-CA");
  for (const char* name : {"client", "expired-client"}) {
    OpenSsl(d, std::string("req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ") +
                   "-keyout " + name + ".key -subj /CN=" + name + " -out " + name + ".csr");
  }
  OpenSsl(d,
          "x509 -req -in client.csr -CA client-ca.pem -CAkey client-ca.key "
          "-CAcreateserial -days 2 -out client.pem");
  OpenSsl(d,
          "x509 -req -in expired-client.csr -CA client-ca.pem -CAkey client-ca.key "
          "-CAcreateserial -days -1 -out expired-client.pem");
  c.server_cert = d + "/server.pem";
  c.server_key = d + "/server.key";
  c.expired_cert = d + "/expired.pem";
  c.stranger_cert = d + "/stranger.pem";
  c.client_ca = d + "/client-ca.pem";
  c.client_cert = d + "/client.pem";
  c.client_key = d + "/client.key";
  c.expired_client_cert = d + "/expired-client.pem";
  c.expired_client_key = d + "/expired-client.key";
  c.keys_file = d + "/api-keys";
  WriteFile(c.keys_file, std::string("# test keys\n") + TestCerts::kAliceKey + " alice\n" +
                             TestCerts::kAliceKey2 + "\talice\n\n" + TestCerts::kBobKey + " bob\n" +
                             TestCerts::kNamelessKey + "\n");
  return c;
}

// TLS channel credentials trusting `ca_file`, presenting a client certificate when given.
inline std::shared_ptr<grpc::ChannelCredentials> TlsCredentials(const std::string& ca_file,
                                                                const std::string& cert_file = "",
                                                                const std::string& key_file = "") {
  // Credentials start gRPC: the fast backup polling ServerProcess asks for must be set first
  // (read once by grpc_init), or connecting to a fresh server takes seconds.
  ::setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "20", /*overwrite=*/0);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFile(ca_file);
  if (!cert_file.empty()) {
    ssl.pem_cert_chain = ReadFile(cert_file);
    ssl.pem_private_key = ReadFile(key_file);
  }
  return grpc::SslCredentials(ssl);
}

// A textgen-server with TLS on all three listeners (gRPC, HTTP API, metrics), probed over TLS
// (with a client certificate for mutual TLS).
inline std::unique_ptr<HttpServer> StartTlsServer(const TestCerts& c,
                                                  std::vector<std::string> extra = {},
                                                  const std::string& client_cert = "",
                                                  const std::string& client_key = "") {
  auto s = std::make_unique<HttpServer>();
  s->http_port = PickFreePort();
  s->metrics_port = PickFreePort();
  ServerProcessOptions o;
  o.extra_args = {"--http-listen",    "127.0.0.1:" + std::to_string(s->http_port),
                  "--metrics-listen", "127.0.0.1:" + std::to_string(s->metrics_port),
                  "--tls-cert",       c.server_cert,
                  "--tls-key",        c.server_key};
  o.extra_args.insert(o.extra_args.end(), extra.begin(), extra.end());
  o.credentials = TlsCredentials(c.server_cert, client_cert, client_key);
  s->process = std::make_unique<ServerProcess>(o);
  return s;
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_SERVER_TLS_TEST_UTIL_H_
