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
N > 1 the other hypotheses follow, one per line. A summary goes to stderr.
  --json                  print every response message as one JSON line instead
)";

}  // namespace

int RunGenerate(const std::vector<std::string>& args) {
  ConnectionOptions conn;
  GenerationFlags gen;
  bool json = false;
  FlagReader r(args, std::string(kGenerateUsage) + "\n" + kGenerationFlagsHelp + "\n" +
                         kConnectionFlagsHelp);
  while (r.Next()) {
    if (ParseConnectionFlag(r, &conn) || ParseGenerationFlag(r, &gen)) continue;
    if (r.flag() == "--json") {
      json = true;
    } else {
      r.Unknown();
    }
  }
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

Usage: textgen-client tokenize --text TEXT [--add-special] [--json]

Prints one "ID<TAB>'PIECE'" line per token, or the TokenizeResponse as JSON.
  --text TEXT             text to tokenize
  --add-special           add BOS when the model uses it
  --json                  print JSON
)";

}  // namespace

int RunTokenize(const std::vector<std::string>& args) {
  ConnectionOptions conn;
  v1::TokenizeRequest request;
  bool json = false, has_text = false;
  FlagReader r(args, std::string(kTokenizeUsage) + "\n" + kConnectionFlagsHelp);
  while (r.Next()) {
    if (ParseConnectionFlag(r, &conn)) continue;
    if (r.flag() == "--text") {
      request.set_text(r.Value());
      has_text = true;
    } else if (r.flag() == "--add-special") {
      request.set_add_special(true);
    } else if (r.flag() == "--json") {
      json = true;
    } else {
      r.Unknown();
    }
  }
  if (!has_text) UsageError("tokenize: give --text (see --help)");

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

Prints one "field: value" line per ModelInfo field (zeros included), or JSON.
  --json                  print JSON
)";

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
  FlagReader r(args, std::string(kInfoUsage) + "\n" + kConnectionFlagsHelp);
  while (r.Next()) {
    if (ParseConnectionFlag(r, &conn)) continue;
    if (r.flag() == "--json") {
      json = true;
    } else {
      r.Unknown();
    }
  }
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
be reached), for container HEALTHCHECKs. The deadline defaults to 5 seconds.
  --service NAME          service to check (default "": the whole server)
)";

}  // namespace

int RunHealth(const std::vector<std::string>& args) {
  ConnectionOptions conn;
  conn.timeout_s = 5;  // a health probe must never hang
  grpc::health::v1::HealthCheckRequest request;
  FlagReader r(args, std::string(kHealthUsage) + "\n" + kConnectionFlagsHelp);
  while (r.Next()) {
    if (ParseConnectionFlag(r, &conn)) continue;
    if (r.flag() == "--service") {
      request.set_service(r.Value());
    } else {
      r.Unknown();
    }
  }
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
Use the id with `generate --session ID`.
  --create                create a session
  --id ID                 with --create: the client-chosen id
  --delete ID             delete that session and free its cache
)";

}  // namespace

int RunSession(const std::vector<std::string>& args) {
  ConnectionOptions conn;
  bool create = false;
  std::string id, del;
  FlagReader r(args, std::string(kSessionUsage) + "\n" + kConnectionFlagsHelp);
  while (r.Next()) {
    if (ParseConnectionFlag(r, &conn)) continue;
    if (r.flag() == "--create") {
      create = true;
    } else if (r.flag() == "--id") {
      id = r.Value();
    } else if (r.flag() == "--delete") {
      del = r.Value();
    } else {
      r.Unknown();
    }
  }
  if (create == !del.empty()) UsageError("session: give exactly one of --create and --delete");
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
