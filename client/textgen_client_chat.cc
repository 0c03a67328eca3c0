// textgen-client chat: an interactive conversation over the Chat RPC (the server renders the
// model's chat template), or with --raw over Generate (each line continues the text).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "client/textgen_client_args.h"
#include "client/textgen_client_commands.h"
#include "client/textgen_client_rpc.h"
#include "google/protobuf/util/json_util.h"

namespace textgen::client {
namespace {

namespace v1 = ::textgen::v1;

constexpr char kChatUsage[] = R"(textgen-client chat: an interactive conversation.

Usage: textgen-client chat [--system TEXT] [--template-kwargs JSON] [--raw] [--usage]
                           [generation options]

Creates a session, then sends each line of stdin as one user message through the Chat RPC
(the server renders the conversation with the model's chat template, keeps the messages and the
KV cache between turns) and streams the answer. Commands: /reset starts a new session, /quit (or
end of input) ends. --prompt, --prompt-ids, --session and --add-bos are not taken.)";

struct ChatFlags {
  ConnectionOptions conn;
  GenerationFlags gen;
  std::string system;
  google::protobuf::Struct template_kwargs;
  bool raw = false;
  bool usage = false;
};

ChatFlags ParseChatFlags(const std::vector<std::string>& args) {
  ChatFlags f;
  cli::FlagSet flags("textgen-client chat", kChatUsage, cli::Wording::kExpected);
  flags.Add("--system", &f.system, cli::Text(), "TEXT",
            "a system message opening each session's conversation");
  const cli::ValueParser<google::protobuf::Struct> json_object = [](const std::string& value,
                                                                    google::protobuf::Struct* out) {
    return google::protobuf::util::JsonStringToMessage(value, out).ok() ? std::string()
                                                                        : "a JSON object";
  };
  flags.Add("--template-kwargs", &f.template_kwargs, json_object, "JSON",
            "template keyword arguments, e.g. '{\"enable_thinking\": false}'");
  flags.Flag("--raw", &f.raw,
             "no chat template: each line is appended to the session's text with\nGenerate "
             "(for models without a template, e.g. TinyStories)");
  flags.Flag("--usage", &f.usage,
             "a usage line per turn on stderr (prompt, cached, generated tokens)");
  AddGenerationFlags(flags, &f.gen);
  AddConnectionFlags(flags, &f.conn);
  flags.Parse(args);
  FinishGenerationFlags(&f.gen, /*prompt_optional=*/true);
  const v1::GenerateRequest& base = f.gen.request;
  if (!base.prompt().empty() || base.prompt_ids_size() > 0) {
    flags.Fail("chat reads its turns from stdin; --prompt and --prompt-ids are not taken");
  }
  if (!base.session_id().empty()) flags.Fail("chat creates its own session; drop --session");
  if (!f.raw && base.has_add_bos()) {
    flags.Fail("--add-bos: the chat template writes the BOS token itself (or use --raw)");
  }
  if (f.raw && (!f.system.empty() || !f.template_kwargs.fields().empty())) {
    flags.Fail("--raw takes no --system or --template-kwargs (there is no template)");
  }
  return f;
}

// ChatRequest's decoding fields carry GenerateRequest's numbers, names and meanings (a
// contract of the proto), so the flags' GenerateRequest, without its prompt and session, is
// a valid encoding of them.
v1::ChatRequest ChatBase(const v1::GenerateRequest& flags) {
  v1::GenerateRequest decoding = flags;
  decoding.clear_prompt();
  decoding.clear_prompt_ids();
  decoding.clear_session_id();
  decoding.clear_add_bos();
  v1::ChatRequest chat;
  chat.ParseFromString(decoding.SerializeAsString());
  return chat;
}

}  // namespace

int RunChat(const std::vector<std::string>& args) {
  const ChatFlags f = ParseChatFlags(args);
  auto stub = v1::TextGeneration::NewStub(MakeChannel(f.conn));
  const bool interactive = isatty(STDIN_FILENO) != 0;
  std::string session_id;
  bool first_turn = true;
  auto open = [&]() {
    session_id = NewSessionId();
    first_turn = true;
    return CreateSession(*stub, f.conn, &session_id);
  };
  if (grpc::Status s = open(); !s.ok()) return ReportError(s);

  const v1::ChatRequest chat_base = ChatBase(f.gen.request);
  int exit_code = 0;
  std::string line;
  while (true) {
    if (interactive) std::fputs("> ", stderr);
    if (!std::getline(std::cin, line) || line == "/quit") break;
    if (line == "/reset") {
      // A failed delete only leaks a session the server will expire; carry on with a new one.
      if (grpc::Status s = DeleteSession(*stub, f.conn, session_id); !s.ok()) ReportError(s);
      if (grpc::Status s = open(); !s.ok()) return ReportError(s);
      if (interactive) std::fputs("(new session)\n", stderr);
      continue;
    }
    v1::GenerateResponse last;
    auto on_message = [&](const v1::GenerateResponse& m) {
      WriteOut(m.text());
      last = m;
    };
    grpc::Status s;
    if (f.raw) {
      v1::GenerateRequest request = f.gen.request;
      request.set_prompt(line);
      request.set_session_id(session_id);
      s = StreamGenerate(*stub, f.conn, request, on_message);
    } else {
      v1::ChatRequest request = chat_base;
      request.set_session_id(session_id);
      *request.mutable_template_kwargs() = f.template_kwargs;
      if (first_turn && !f.system.empty()) {
        v1::ChatMessage* system = request.add_messages();
        system->set_role("system");
        system->set_content(f.system);
      }
      v1::ChatMessage* user = request.add_messages();
      user->set_role("user");
      user->set_content(line);
      s = StreamChat(*stub, f.conn, request, on_message);
    }
    WriteOut("\n");
    if (s.ok()) {
      first_turn = false;
      if (f.usage) PrintUsageSummary(last);
    } else {
      // The turn failed (e.g. the context is full); the session itself may still be usable.
      exit_code = ReportError(s);
    }
  }
  if (grpc::Status s = DeleteSession(*stub, f.conn, session_id); !s.ok()) return ReportError(s);
  return exit_code;
}

}  // namespace textgen::client
