// gRPC plumbing shared by the textgen-client subcommands.
#ifndef TEXTGEN_CLIENT_TEXTGEN_CLIENT_RPC_H_
#define TEXTGEN_CLIENT_TEXTGEN_CLIENT_RPC_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "client/textgen_client_args.h"
#include "google/protobuf/message.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen::client {

// Metadata key carrying the session id on every call of a session, so that a load balancer can
// hash on it and keep a conversation on the replica holding its KV cache.
inline constexpr char kSessionMetadataKey[] = "x-session-id";

// A channel to options.server: plain text, or TLS with the options' files (a usage error, exit
// 2, when they cannot be read). `own_connection` gives the channel its own subchannel
// pool, i.e. its own TCP connection even when another channel targets the same address (the
// load generator wants one connection per worker, as independent clients would have).
std::shared_ptr<grpc::Channel> MakeChannel(const ConnectionOptions& options,
                                           bool own_connection = false);

// Sets the deadline from options.timeout_s, the session metadata when session_id is set and the
// API key's authorization metadata when there is one.
void PrepareContext(const ConnectionOptions& options, const std::string& session_id,
                    grpc::ClientContext* context);

// "INVALID_ARGUMENT" etc.
std::string StatusCodeName(grpc::StatusCode code);

// Prints "error: CODE: message" to stderr and returns kExitRpcError.
int ReportError(const grpc::Status& status);

// One JSON line (proto field names, defaults omitted) as protobuf's JSON mapping defines it.
std::string ToJson(const google::protobuf::Message& message);

// Writes `text` to stdout and flushes it (streaming: each delta shows as soon as it arrives).
void WriteOut(const std::string& text);

// A one-line summary of a stream's final message (usage, finish reason) on stderr, so that
// stdout stays the text alone. Nothing without usage.
void PrintUsageSummary(const textgen::v1::GenerateResponse& last);

// 32 lowercase hex characters from 128 random bits: the client-chosen session id format.
std::string NewSessionId();

// Runs one streaming Generate call, handing each message to on_message as it arrives.
grpc::Status StreamGenerate(
    textgen::v1::TextGeneration::Stub& stub, const ConnectionOptions& options,
    const textgen::v1::GenerateRequest& request,
    const std::function<void(const textgen::v1::GenerateResponse&)>& on_message);

// Runs one streaming Chat call, as StreamGenerate.
grpc::Status StreamChat(
    textgen::v1::TextGeneration::Stub& stub, const ConnectionOptions& options,
    const textgen::v1::ChatRequest& request,
    const std::function<void(const textgen::v1::GenerateResponse&)>& on_message);

// CreateSession / DeleteSession with the session's metadata attached. CreateSession proposes
// *session_id (a fresh random 128-bit id when empty, so that the create already carries
// x-session-id) and replaces it with the id the server answers (the same one, normally).
grpc::Status CreateSession(textgen::v1::TextGeneration::Stub& stub,
                           const ConnectionOptions& options, std::string* session_id);
grpc::Status DeleteSession(textgen::v1::TextGeneration::Stub& stub,
                           const ConnectionOptions& options, const std::string& session_id);

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_TEXTGEN_CLIENT_RPC_H_
