// The Python example (client/python/chat_example.py) against a real server, with modules
// generated as docs/api-grpc.md (Python) says: Debian's protoc and grpc_python_plugin,
// python3-grpcio and python3-protobuf, /usr/bin/python3.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace python_client_test {

v1::ChatMessage Message(const std::string& role, const std::string& content) {
  v1::ChatMessage m;
  m.set_role(role);
  m.set_content(content);
  return m;
}

std::string ChatText(v1::TextGeneration::Stub& stub, const std::vector<v1::ChatMessage>& msgs) {
  v1::ChatRequest req;
  for (const auto& m : msgs) *req.add_messages() = m;
  req.set_max_new_tokens(12);
  StreamResult r = RunChat(stub, req);
  INFO(r.status.error_message());
  REQUIRE(r.status.ok());
  return r.text;
}

TEST_CASE("the Python example chats over a session with Debian's packages", "[server][python]") {
  ServerProcessOptions o;
  o.extra_args = {"--chat-template",
                  ChatTemplatesDir() + "/templates/Qwen-Qwen2.5-7B-Instruct.jinja"};
  ServerProcess server(o);

  const std::string out = ScratchDir();
  const std::string src = SourceDir();
  CommandResult gen =
      RunCommand("protoc -I " + ShellQuote(src + "/proto") + " --python_out=" + ShellQuote(out) +
                 " --grpc_python_out=" + ShellQuote(out) +
                 " --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin " +
                 ShellQuote(src + "/proto/textgen/v1/textgen.proto") + " 2>&1");
  INFO(gen.out);
  REQUIRE(gen.exit_code == 0);

  const std::string err_file = out + "/stderr.txt";
  CommandResult run = RunCommand(
      "PYTHONPATH=" + ShellQuote(out) + " /usr/bin/python3 " +
      ShellQuote(src + "/client/python/chat_example.py") + " --server " + server.address() +
      " --max-new-tokens 12 'Tell me a story.' 'Who is in it?' 2>" + ShellQuote(err_file));
  const std::string err = ReadFile(err_file);
  // stderr first: CI logs cut long messages, and stderr says why a run went wrong.
  INFO("stderr: " << err << "\nstdout: " << run.out);
  REQUIRE(run.exit_code == 0);

  // Each turn's answer is what Chat gives the whole conversation so far.
  auto stub = NewStub(server);
  const std::string a1 = ChatText(*stub, {Message("user", "Tell me a story.")});
  const std::string a2 =
      ChatText(*stub, {Message("user", "Tell me a story."), Message("assistant", a1),
                       Message("user", "Who is in it?")});
  CHECK(run.out == a1 + "\n" + a2 + "\n");
  // The second turn reused the first's KV cache. Only the example's usage lines count: the grpcio
  // library may log lines of its own to stderr (one CI run saw a third line there).
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(err, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "[")) lines.emplace_back(line);
  }
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[0], Catch::Contains("(0 cached)"));
  CHECK_THAT(lines[1], !Catch::Contains("(0 cached)"));
}

}  // namespace python_client_test
}  // namespace textgen::testing
