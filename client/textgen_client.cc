// textgen-client: the command-line gRPC client of textgen-server.
//
//   textgen-client SUBCOMMAND [flags]      (textgen-client SUBCOMMAND --help for its flags)
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "client/textgen_client_args.h"
#include "client/textgen_client_commands.h"

namespace {

constexpr char kUsage[] = R"(textgen-client: talk to a textgen-server over gRPC.

Usage: textgen-client SUBCOMMAND [flags]   (--server HOST:PORT, default 127.0.0.1:50051)

Subcommands:
  generate   stream one generation to stdout (--json: every message as a JSON line)
  chat       interactive conversation in a server-side session, one turn per stdin line
  tokenize   the model's token ids and pieces of --text
  info       the served model's ModelInfo
  health     grpc.health.v1 Check; exits 0 iff SERVING
  session    create (--create [--id ID]) or delete (--delete ID) a server-side session
  load       concurrent streams: requests/s, tokens/s, TTFT and inter-token latency

`textgen-client SUBCOMMAND --help` lists a subcommand's flags. Exit status: 0 success, 1 an error
status from the server (printed as "error: CODE: message"), 2 bad usage.
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace textgen::client;
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "generate") return RunGenerate(args);
  if (command == "chat") return RunChat(args);
  if (command == "tokenize") return RunTokenize(args);
  if (command == "info") return RunInfo(args);
  if (command == "health") return RunHealth(args);
  if (command == "load") return RunLoad(args);
  if (command == "session") return RunSession(args);
  UsageError("unknown subcommand '" + command + "' (see --help)");
}
