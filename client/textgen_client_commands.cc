#include "client/textgen_client_commands.h"

#include <cstdio>
#include <string>

#include "client/textgen_client_args.h"
#include "client/textgen_client_rpc.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace textgen::client {
namespace {

namespace v1 = ::textgen::v1;

constexpr char kGenerateUsage[] =
    R"(textgen-client generate: stream one generation to stdout.

Usage: textgen-client generate (--prompt TEXT | --prompt-ids 1,2,3) [options]

Prints the generated text only (not the prompt) as it arrives, then a newline; with --num-return
N > 1 the other hypotheses follow, one per line. A summary goes to stderr.)";

}  // namespace

int RunGenerate(const std::vector<std::string>& args) {
  ConnectionOptions conn;
  GenerationFlags gen;
  bool json = false;
  cli::FlagSet f("textgen-client generate", kGenerateUsage, cli::Wording::kExpected);
  f.Flag("--json", &json, "print every response message as one JSON line instead");
  AddGenerationFlags(f, &gen);
  AddConnectionFlags(f, &conn);
  f.Parse(args);
  FinishGenerationFlags(&gen, /*prompt_optional=*/false);

  auto stub = v1::TextGeneration::NewStub(MakeChannel(conn));
  v1::GenerateResponse last;
  bool streamed_text = false;
  grpc::Status status = StreamGenerate(*stub, conn, gen.request, [&](const auto& m) {
    if (json) {
      WriteOut(ToJson(m) + "\n");
    } else if (!m.text().empty()) {
      WriteOut(m.text());
      streamed_text = true;
    }
    last = m;
  });
  if (!json) {
    // A server that did not stream (or a stream cut short) still has the best text in the
    // final message's hypotheses.
    if (!streamed_text && last.hypotheses_size() > 0) WriteOut(last.hypotheses(0).text());
    if (streamed_text || last.hypotheses_size() > 0) WriteOut("\n");
    for (int i = 1; i < last.hypotheses_size(); ++i) WriteOut(last.hypotheses(i).text() + "\n");
  }
  if (!status.ok()) return ReportError(status);
  if (!json) PrintUsageSummary(last);
  return 0;
}

namespace {

constexpr char kTokenizeUsage[] = R"(textgen-client tokenize: the server model's tokens of a text.

Usage: textgen-client tokenize --text TEXT [--add-special] [--parse-special] [--json]

Prints one "ID<TAB>'PIECE'" line per token, or the TokenizeResponse as JSON.)";

}  // namespace

int RunTokenize(const std::vector<std::string>& args) {
  ConnectionOptions conn;
  v1::TokenizeRequest request;
  bool json = false;
  cli::FlagSet f("textgen-client tokenize", kTokenizeUsage, cli::Wording::kExpected);
  f.AddWith<std::string>("--text", cli::Text(), "TEXT", "text to tokenize",
                         [&request](const std::string& v) { request.set_text(v); });
  f.Flag("--add-special", "add BOS when the model uses it",
         [&request] { request.set_add_special(true); });
  f.Flag("--parse-special",
         "text spelling a special token (<|im_start|>, <s>, ...) becomes\nits id, as in a rendered "
         "chat prompt",
         [&request] { request.set_parse_special(true); });
  f.Flag("--json", &json, "print JSON");
  AddConnectionFlags(f, &conn);
  f.Parse(args);
  if (!f.Given("--text")) f.Fail("give --text");

  auto stub = v1::TextGeneration::NewStub(MakeChannel(conn));
  grpc::ClientContext context;
  PrepareContext(conn, "", &context);
  v1::TokenizeResponse response;
  if (grpc::Status s = stub->Tokenize(&context, request, &response); !s.ok()) {
    return ReportError(s);
  }
  if (json) {
    WriteOut(ToJson(response) + "\n");
    return 0;
  }
  for (int i = 0; i < response.ids_size(); ++i) {
    const std::string piece = i < response.pieces_size() ? response.pieces(i) : "";
    WriteOut(std::to_string(response.ids(i)) + "\t'" + piece + "'\n");
  }
  return 0;
}

namespace {

constexpr char kInfoUsage[] = R"(textgen-client info: the served model's ModelInfo.

Usage: textgen-client info [--json]

Prints one "field: value" line per ModelInfo field (zeros included), or JSON.)";

// Every field, zeros included, in .proto order: ModelInfo is all scalars.
std::string FieldLines(const google::protobuf::Message& m) {
  std::string out;
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  const google::protobuf::Reflection* refl = m.GetReflection();
  using FD = google::protobuf::FieldDescriptor;
  for (int i = 0; i < d->field_count(); ++i) {
    const FD* f = d->field(i);
    if (f->is_repeated()) continue;
    std::string value;
    switch (f->cpp_type()) {
      case FD::CPPTYPE_STRING:
        value = refl->GetString(m, f);
        break;
      case FD::CPPTYPE_UINT32:
        value = std::to_string(refl->GetUInt32(m, f));
        break;
      case FD::CPPTYPE_INT32:
        value = std::to_string(refl->GetInt32(m, f));
        break;
      case FD::CPPTYPE_UINT64:
        value = std::to_string(refl->GetUInt64(m, f));
        break;
      case FD::CPPTYPE_INT64:
        value = std::to_string(refl->GetInt64(m, f));
        break;
      case FD::CPPTYPE_BOOL:
        value = refl->GetBool(m, f) ? "true" : "false";
        break;
      case FD::CPPTYPE_FLOAT:
        value = std::to_string(refl->GetFloat(m, f));
        break;
      case FD::CPPTYPE_DOUBLE:
        value = std::to_string(refl->GetDouble(m, f));
        break;
      case FD::CPPTYPE_ENUM:
        value = refl->GetEnum(m, f)->name();
        break;
      case FD::CPPTYPE_MESSAGE:
        continue;  // none today; a future nested message shows up in --json
    }
    out += f->name() + ": " + value + "\n";
  }
  return out;
}

}  // namespace

int RunInfo(const std::vector<std::string>& args) {
  ConnectionOptions conn;
  bool json = false;
  cli::FlagSet f("textgen-client info", kInfoUsage, cli::Wording::kExpected);
  f.Flag("--json", &json, "print JSON");
  AddConnectionFlags(f, &conn);
  f.Parse(args);
  auto stub = v1::TextGeneration::NewStub(MakeChannel(conn));
  grpc::ClientContext context;
  PrepareContext(conn, "", &context);
  v1::ModelInfo info;
  if (grpc::Status s = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info); !s.ok()) {
    return ReportError(s);
  }
  WriteOut(json ? ToJson(info) + "\n" : FieldLines(info));
  return 0;
}

namespace {

constexpr char kHealthUsage[] = R"(textgen-client health: grpc.health.v1.Health/Check.

Usage: textgen-client health [--service NAME] [--timeout SECONDS]

Prints the serving status and exits 0 iff it is SERVING (1 otherwise, or when the server cannot
be reached), for container HEALTHCHECKs. The deadline defaults to 5 seconds.)";

}  // namespace

int RunHealth(const std::vector<std::string>& args) {
  ConnectionOptions conn;
  conn.timeout_s = 5;  // a health probe must never hang
  grpc::health::v1::HealthCheckRequest request;
  cli::FlagSet f("textgen-client health", kHealthUsage, cli::Wording::kExpected);
  f.AddWith<std::string>("--service", cli::Text(), "NAME",
                         "service to check (default \"\": the whole server)",
                         [&request](const std::string& v) { request.set_service(v); });
  AddConnectionFlags(f, &conn);
  f.Parse(args);
  auto stub = grpc::health::v1::Health::NewStub(MakeChannel(conn));
  grpc::ClientContext context;
  PrepareContext(conn, "", &context);
  grpc::health::v1::HealthCheckResponse response;
  if (grpc::Status s = stub->Check(&context, request, &response); !s.ok()) {
    return ReportError(s);
  }
  WriteOut(grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()) + "\n");
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : kExitRpcError;
}

}  // namespace textgen::client

namespace textgen::client {
namespace {

constexpr char kSessionUsage[] = R"(textgen-client session: create or delete a server-side session.

Usage: textgen-client session --create [--id ID]
       textgen-client session --delete ID

--create prints the new session's id (32 hex characters): 128 random bits the client picks, or
the --id given, so that a load balancer hashing on x-session-id sends the create and every later
call to the same replica.
Use the id with `generate --session ID`.)";

}  // namespace

int RunSession(const std::vector<std::string>& args) {
  ConnectionOptions conn;
  bool create = false;
  std::string id, del;
  cli::FlagSet f("textgen-client session", kSessionUsage, cli::Wording::kExpected);
  f.Flag("--create", &create, "create a session");
  f.Add("--id", &id, cli::Text(), "ID", "with --create: the client-chosen id");
  f.Add("--delete", &del, cli::Text(), "ID", "delete that session and free its cache");
  AddConnectionFlags(f, &conn);
  f.Parse(args);
  if (create == !del.empty()) f.Fail("give exactly one of --create and --delete");
  auto stub = v1::TextGeneration::NewStub(MakeChannel(conn));
  if (create) {
    if (grpc::Status s = CreateSession(*stub, conn, &id); !s.ok()) return ReportError(s);
    WriteOut(id + "\n");
    return 0;
  }
  if (grpc::Status s = DeleteSession(*stub, conn, del); !s.ok()) return ReportError(s);
  return 0;
}

}  // namespace textgen::client
