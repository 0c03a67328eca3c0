// The textgen-client subcommands. Each takes the arguments after the subcommand's name and
// returns the process exit status (see kExitRpcError, kExitUsage).
#ifndef TEXTGEN_CLIENT_TEXTGEN_CLIENT_COMMANDS_H_
#define TEXTGEN_CLIENT_TEXTGEN_CLIENT_COMMANDS_H_

#include <string>
#include <vector>

namespace textgen::client {

int RunGenerate(const std::vector<std::string>& args);
int RunChat(const std::vector<std::string>& args);
int RunTokenize(const std::vector<std::string>& args);
int RunInfo(const std::vector<std::string>& args);
int RunHealth(const std::vector<std::string>& args);
int RunSession(const std::vector<std::string>& args);
// In textgen_client_load.cc.
int RunLoad(const std::vector<std::string>& args);

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_TEXTGEN_CLIENT_COMMANDS_H_
