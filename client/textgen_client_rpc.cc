#include "client/textgen_client_rpc.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/json_util.h"

namespace textgen::client {

namespace v1 = ::textgen::v1;

namespace {

std::string ReadPem(const char* flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) UsageError(std::string(flag) + ": cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const ConnectionOptions& options) {
  if (!options.tls()) return grpc::InsecureChannelCredentials();
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    UsageError("--tls-cert and --tls-key must be given together");
  }
  grpc::SslCredentialsOptions ssl;
  // Empty roots: gRPC uses the system's (or $GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).
  if (!options.tls_ca.empty()) ssl.pem_root_certs = ReadPem("--tls-ca", options.tls_ca);
  if (!options.tls_cert.empty()) {
    ssl.pem_cert_chain = ReadPem("--tls-cert", options.tls_cert);
    ssl.pem_private_key = ReadPem("--tls-key", options.tls_key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const ConnectionOptions& options, bool own_connection) {
  grpc::ChannelArguments args;
  // Generation streams can be long; never let an idle channel drop in the middle of a chat.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 60 * 1000);
  if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (options.tls() && !options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  return grpc::CreateCustomChannel(options.server, ChannelCredentials(options), args);
}

void PrepareContext(const ConnectionOptions& options, const std::string& session_id,
                    grpc::ClientContext* context) {
  if (options.timeout_s > 0) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              std::chrono::duration<double>(options.timeout_s)));
  }
  if (!session_id.empty()) context->AddMetadata(kSessionMetadataKey, session_id);
  if (!options.api_key.empty()) context->AddMetadata("authorization", "Bearer " + options.api_key);
}

std::string StatusCodeName(grpc::StatusCode code) {
  // gRPC and Abseil share the canonical code numbering; Abseil has the names.
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

int ReportError(const grpc::Status& status) {
  std::fprintf(stderr, "error: %s: %s\n", StatusCodeName(status.error_code()).c_str(),
               status.error_message().c_str());
  return kExitRpcError;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;  // finish_reason, as in the .proto and textgen-run
  std::string out;
  // Only fails on messages that cannot be represented (e.g. unset Any); ours always can.
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

std::string NewSessionId() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) absl::StrAppendFormat(&id, "%08x", rd());
  return id;
}

grpc::Status StreamGenerate(v1::TextGeneration::Stub& stub, const ConnectionOptions& options,
                            const v1::GenerateRequest& request,
                            const std::function<void(const v1::GenerateResponse&)>& on_message) {
  grpc::ClientContext context;
  PrepareContext(options, request.session_id(), &context);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub.Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) on_message(response);
  return reader->Finish();
}

void WriteOut(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void PrintUsageSummary(const v1::GenerateResponse& last) {
  if (!last.has_usage()) return;
  const v1::Usage& u = last.usage();
  std::fprintf(stderr,
               "[%u prompt tokens (%u cached), %u generated in %.1f ms, first token after %.2f "
               "ms, %s]\n",
               u.prompt_tokens(), u.cached_tokens(), u.generated_tokens(), u.total_ms(),
               u.time_to_first_token_ms(), v1::FinishReason_Name(last.finish_reason()).c_str());
}

grpc::Status StreamChat(v1::TextGeneration::Stub& stub, const ConnectionOptions& options,
                        const v1::ChatRequest& request,
                        const std::function<void(const v1::GenerateResponse&)>& on_message) {
  grpc::ClientContext context;
  PrepareContext(options, request.session_id(), &context);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub.Chat(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) on_message(response);
  return reader->Finish();
}

grpc::Status CreateSession(v1::TextGeneration::Stub& stub, const ConnectionOptions& options,
                           std::string* session_id) {
  // The client picks the id so that the create, like every later call, carries x-session-id:
  // a balancer hashing on it then creates the session on the replica that will serve it.
  if (session_id->empty()) *session_id = NewSessionId();
  grpc::ClientContext context;
  PrepareContext(options, *session_id, &context);
  v1::CreateSessionRequest request;
  request.set_session_id(*session_id);
  v1::Session session;
  grpc::Status status = stub.CreateSession(&context, request, &session);
  if (status.ok() && !session.session_id().empty()) *session_id = session.session_id();
  return status;
}

grpc::Status DeleteSession(v1::TextGeneration::Stub& stub, const ConnectionOptions& options,
                           const std::string& session_id) {
  grpc::ClientContext context;
  PrepareContext(options, session_id, &context);
  v1::DeleteSessionRequest request;
  request.set_session_id(session_id);
  v1::DeleteSessionResponse response;
  return stub.DeleteSession(&context, request, &response);
}

}  // namespace textgen::client
