// The one place where engine errors (absl::Status) become gRPC statuses.
#ifndef TEXTGEN_SERVER_STATUS_CONVERT_H_
#define TEXTGEN_SERVER_STATUS_CONVERT_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace textgen::server {

// Same code where gRPC has it (InvalidArgument, NotFound, FailedPrecondition,
// ResourceExhausted, AlreadyExists, Unavailable, Cancelled, Unimplemented, Unauthenticated,
// and OK); every other
// code is INTERNAL. The message is kept verbatim.
grpc::Status ToGrpcStatus(const absl::Status& status);

// "OK", "INVALID_ARGUMENT", ... for logs.
const char* GrpcCodeName(grpc::StatusCode code);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_STATUS_CONVERT_H_
