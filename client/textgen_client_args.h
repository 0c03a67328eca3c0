// Command-line parsing shared by the textgen-client subcommands.
#ifndef TEXTGEN_CLIENT_TEXTGEN_CLIENT_ARGS_H_
#define TEXTGEN_CLIENT_TEXTGEN_CLIENT_ARGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "textgen/v1/textgen.pb.h"

namespace textgen::client {

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";

// Exit statuses: 0 success, 1 the server said no (or was unreachable), 2 bad usage.
inline constexpr int kExitRpcError = 1;
inline constexpr int kExitUsage = 2;

// Prints "textgen-client: MESSAGE" to stderr and exits with kExitUsage.
[[noreturn]] void UsageError(const std::string& message);

// Walks the flags of one subcommand:
//   FlagReader r(args, kUsage);
//   while (r.Next()) {
//     if (r.flag() == "--text") text = r.Value(); else r.Unknown();
//   }
// Both "--flag value" and "--flag=value" are accepted; --help prints the usage and exits 0.
class FlagReader {
 public:
  FlagReader(std::vector<std::string> args, std::string usage);

  // Advances to the next flag; false when none are left.
  bool Next();
  const std::string& flag() const { return flag_; }

  // The current flag's value; a usage error when it is missing.
  std::string Value();
  int64_t Int(int64_t min, int64_t max);
  uint64_t Uint64();
  float Float();
  double Double(double min);
  bool Bool();  // true|false
  // Value() checked against a fixed set of words.
  std::string Choice(const std::vector<std::string>& choices);

  // Reports the current flag as unknown (usage error).
  [[noreturn]] void Unknown() const;
  // Usage error about the current flag.
  [[noreturn]] void Bad(const std::string& what) const;

 private:
  std::vector<std::string> args_;
  std::string usage_;
  size_t next_ = 0;
  std::string flag_;
  bool has_inline_value_ = false;
  std::string inline_value_;
};

// Flags every subcommand takes.
struct ConnectionOptions {
  std::string server = kDefaultServer;
  double timeout_s = 0;  // deadline of each call; 0 = none
  // Sent as "authorization: Bearer KEY" on every call; empty = none. Defaults to
  // $TEXTGEN_API_KEY (a key on the command line is visible to every user in ps).
  std::string api_key = Env("TEXTGEN_API_KEY");
  // TLS: verify the server against the CA certificates in this PEM file (or the system's with
  // tls_system_roots); both unset = plain text. Defaults to $TEXTGEN_TLS_CA.
  std::string tls_ca = Env("TEXTGEN_TLS_CA");
  bool tls_system_roots = false;
  // The name the server's certificate must carry, when not the --server host (e.g. a health
  // check on 127.0.0.1 of a certificate for textgen.example.com). $TEXTGEN_TLS_SERVER_NAME.
  std::string tls_server_name = Env("TEXTGEN_TLS_SERVER_NAME");
  // Mutual TLS: the client's own PEM certificate and key.
  std::string tls_cert;
  std::string tls_key;

  bool tls() const { return !tls_ca.empty() || tls_system_roots || !tls_cert.empty(); }
  // The variable's value, "" when unset.
  static std::string Env(const char* name);
};
// Consumes --server / --timeout / --api-key / --tls*; false if the current flag is none.
bool ParseConnectionFlag(FlagReader& r, ConnectionOptions* options);
extern const char kConnectionFlagsHelp[];

// The GenerateRequest built from flags, shared by generate, chat and load.
struct GenerationFlags {
  textgen::v1::GenerateRequest request;
};
// Consumes one GenerateRequest flag; false if the current flag is not one.
bool ParseGenerationFlag(FlagReader& r, GenerationFlags* flags);
// Checks the prompt: exactly one of --prompt and --prompt-ids unless `prompt_optional`. The
// method stays unset unless --method was given: the server infers it from the other fields.
void FinishGenerationFlags(GenerationFlags* flags, bool prompt_optional);
extern const char kGenerationFlagsHelp[];

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_TEXTGEN_CLIENT_ARGS_H_
