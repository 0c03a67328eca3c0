// Flags shared by the textgen-client subcommands (on cli::FlagSet).
#ifndef TEXTGEN_CLIENT_TEXTGEN_CLIENT_ARGS_H_
#define TEXTGEN_CLIENT_TEXTGEN_CLIENT_ARGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::client {

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";

// Exit statuses: 0 success, 1 the server said no (or was unreachable), 2 bad usage.
inline constexpr int kExitRpcError = 1;
inline constexpr int kExitUsage = 2;

// Prints "textgen-client: MESSAGE" to stderr and exits with kExitUsage.
[[noreturn]] void UsageError(const std::string& message);

// Flags every subcommand takes.
struct ConnectionOptions {
  std::string server = kDefaultServer;
  double timeout_s = 0;  // deadline of each call; 0 = none
  // Sent as "authorization: Bearer KEY" on every call; empty = none. --api-key or
  // $TEXTGEN_API_KEY (a key on the command line is visible to every user in ps).
  std::string api_key;
  // TLS: verify the server against the CA certificates in this PEM file (or the system's with
  // tls_system_roots); both unset = plain text. --tls-ca or $TEXTGEN_TLS_CA.
  std::string tls_ca;
  bool tls_system_roots = false;
  // The name the server's certificate must carry, when not the --server host (e.g. a health
  // check on 127.0.0.1 of a certificate for textgen.example.com). $TEXTGEN_TLS_SERVER_NAME.
  std::string tls_server_name;
  // Mutual TLS: the client's own PEM certificate and key.
  std::string tls_cert;
  std::string tls_key;

  bool tls() const { return !tls_ca.empty() || tls_system_roots || !tls_cert.empty(); }
};
// Adds --server / --timeout / --api-key / --tls* (listed under "Connection").
void AddConnectionFlags(cli::FlagSet& flags, ConnectionOptions* options);

// The GenerateRequest built from flags, shared by generate, chat and load.
struct GenerationFlags {
  textgen::v1::GenerateRequest request;
};
// Adds the GenerateRequest flags (listed under "Generation").
void AddGenerationFlags(cli::FlagSet& flags, GenerationFlags* gen);
// Checks the prompt: exactly one of --prompt and --prompt-ids unless `prompt_optional`. The
// method stays unset unless --method was given: the server infers it from the other fields.
void FinishGenerationFlags(GenerationFlags* flags, bool prompt_optional);

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_TEXTGEN_CLIENT_ARGS_H_
