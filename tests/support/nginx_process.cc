#include "tests/support/nginx_process.h"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/substitute.h"
#include "tests/support/server_process.h"
#include "tests/test_util.h"

namespace textgen::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The project's load-balancer files; the test changes nothing in them but addresses.
std::string ProjectNginxDir() { return SourceDir() + "/docker/nginx"; }

// `text` with the address (first argument) of each `directive` line replaced by the next of
// `addresses`; FAILs unless there is exactly one such line per address. Comments stay as they
// are, so the rest of each line (e.g. max_fails=1 fail_timeout=5s, http2) is the project's.
std::string ReplaceAddresses(const std::string& file, const std::string& text,
                             const std::string& directive,
                             const std::vector<std::string>& addresses) {
  const std::regex line_re("^(\\s*" + directive + "\\s+)(\\S+)(.*)$");
  std::istringstream in(text);
  std::string line, out;
  size_t replaced = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, line_re)) {
      if (replaced == addresses.size()) {
        FAIL(file << " has more `" << directive << "` lines than the test's " << addresses.size());
      }
      line = m[1].str() + addresses[replaced++] + m[3].str();
    }
    out += line + "\n";
  }
  if (replaced != addresses.size()) {
    FAIL(file << " has " << replaced << " `" << directive << "` lines; the test needs "
              << addresses.size());
  }
  return out;
}

}  // namespace

NginxProcess::NginxProcess(const std::vector<std::string>& replicas, milliseconds startup_timeout) {
  // Fail, not skip: a missing nginx would otherwise pass the affinity tests silently.
  if (::access(kNginxPath, X_OK) != 0) {
    FAIL(kNginxPath << " not found: install Debian's nginx-light (scripts/install-deps.sh) to "
                       "run the load-balancer tests");
  }
  prefix_ = ScratchDir();
  std::string why;
  // A port picked free can be taken before nginx binds it; a few tries make that moot.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (TryStart(replicas, startup_timeout, &why)) return;
  }
  FAIL("nginx did not start: " << why << "\n--- nginx error log ---\n" << ErrorLog());
}

NginxProcess::~NginxProcess() { child_.Stop(SIGTERM, milliseconds(5000)); }

bool NginxProcess::TryStart(const std::vector<std::string>& replicas, milliseconds timeout,
                            std::string* why) {
  address_ = "127.0.0.1:" + std::to_string(PickFreePort());
  const std::string dir = ProjectNginxDir();
  // textgen.conf includes these by relative path, which nginx resolves against the folder of
  // the top-level file (-c): the prefix.
  WriteFile(prefix_ + "/replicas.conf",
            ReplaceAddresses(dir + "/replicas.conf", ReadFile(dir + "/replicas.conf"), "server",
                             replicas));
  WriteFile(
      prefix_ + "/listen.conf",
      ReplaceAddresses(dir + "/listen.conf", ReadFile(dir + "/listen.conf"), "listen", {address_}));
  const std::string& p = prefix_;
  // $0 = the prefix, $1 = the project's docker/nginx (quoted: paths may hold spaces).
  WriteFile(p + "/nginx.conf", absl::Substitute(R"(# Written by tests/support/nginx_process.cc.
# One process, no workers: the kernel kills it with the test (a worker would outlive a
# SIGKILLed master), and round-robin runs one deterministic sequence.
master_process off;
pid "$0/nginx.pid";
error_log "$0/error.log" info;
events {
  worker_connections 256;
}
http {
  client_body_temp_path "$0/client_body";
  proxy_temp_path "$0/proxy";
  fastcgi_temp_path "$0/fastcgi";
  uwsgi_temp_path "$0/uwsgi";
  scgi_temp_path "$0/scgi";
  include "$1/textgen.conf";
  access_log "$0/access.log" textgen;
}
)",
                                                p, dir));
  // -e: errors before the config is read go to the prefix too, not /var/log/nginx.
  child_.Start({kNginxPath, "-p", p + "/", "-c", p + "/nginx.conf", "-e", p + "/error.log", "-g",
                "daemon off;"},
               {}, p + "/nginx.out");

  std::shared_ptr<grpc::Channel> channel = NewChannel();
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (!child_.Running()) {
      // The reason is in the error log (-e), e.g. the port was taken meanwhile.
      *why = "exited with code " + std::to_string(child_.exit_code());
      return false;
    }
    // Through nginx to a replica: proves the listen port, HTTP/2 and grpc_pass all work.
    HealthReply h = CheckHealth(*channel, "", milliseconds(500));
    if (h.ok && h.state == HealthState::kServing) return true;
    *why = h.ok ? "health state " + std::to_string(static_cast<int>(h.state)) : h.error;
    std::this_thread::sleep_for(milliseconds(50));
  }
  *why = "no SERVING health check through nginx within " + std::to_string(timeout.count()) +
         " ms (" + *why + ")";
  child_.Stop(SIGKILL, milliseconds(5000));
  return false;
}

std::shared_ptr<grpc::Channel> NginxProcess::NewChannel() const { return NewTestChannel(address_); }

std::string NginxProcess::ErrorLog() const {
  std::error_code ec;
  return std::filesystem::exists(prefix_ + "/error.log", ec) ? ReadFile(prefix_ + "/error.log")
                                                             : "";
}

std::string NginxProcess::AccessLog() const {
  std::error_code ec;
  return std::filesystem::exists(prefix_ + "/access.log", ec) ? ReadFile(prefix_ + "/access.log")
                                                              : "";
}

}  // namespace textgen::testing
