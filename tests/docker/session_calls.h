// Session calls as textgen-client makes them through the load balancer, for the docker/ tests:
// client-chosen ids, sent in the request and in the x-session-id metadata nginx hashes on.
#ifndef TEXTGEN_TESTS_DOCKER_SESSION_CALLS_H_
#define TEXTGEN_TESTS_DOCKER_SESSION_CALLS_H_

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include "client/textgen_client_rpc.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen::testing {

// 128 random bits as 32 lowercase hex characters: the client-chosen id format.
inline std::string RandomSessionId(std::mt19937_64& rng) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return buf;
}

// CreateSession with the id in the request and in the metadata; a session created under
// another id fails the test.
inline grpc::Status CreateSession(v1::TextGeneration::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ctx.AddMetadata(client::kSessionMetadataKey, id);
  v1::CreateSessionRequest req;
  req.set_session_id(id);
  v1::Session session;
  grpc::Status st = stub.CreateSession(&ctx, req, &session);
  if (st.ok()) CHECK(session.session_id() == id);
  return st;
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_DOCKER_SESSION_CALLS_H_
