// The certificate files a listener serves TLS with (--tls-cert, --tls-key, --tls-client-ca),
// checked once at start so that a wrong file fails the start with the flag's name instead of
// failing every client's handshake later.
#ifndef TEXTGEN_SERVER_TLS_FILES_H_
#define TEXTGEN_SERVER_TLS_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace textgen::server {

struct TlsFiles {
  std::string cert;       // PEM certificate chain, the server's own certificate first
  std::string key;        // PEM private key of that certificate
  std::string client_ca;  // PEM CA certificates: set = mutual TLS (clients must present one)

  bool enabled() const { return !cert.empty() || !key.empty(); }
};

// OK if TLS is off. Otherwise InvalidArgument naming the flag when: only one of cert and key is
// given (or the client CA without them), a file cannot be read or holds no PEM certificate /
// key, the key is not the certificate's, or the certificate is not valid now (expired or not yet
// valid). A certificate that expires within a week is logged as a warning.
absl::Status CheckTlsFiles(const TlsFiles& tls);

// What CheckTlsFiles checked, read for gRPC's credentials.
struct TlsPem {
  std::string cert_chain;
  std::string private_key;
  std::string client_ca;
};
absl::StatusOr<TlsPem> ReadTlsFiles(const TlsFiles& tls);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_TLS_FILES_H_
