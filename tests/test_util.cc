#include "tests/test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

namespace textgen::testing {
namespace fs = std::filesystem;

namespace {
std::mutex g_mu;
std::vector<std::string>* g_scratch = nullptr;

void RemoveScratch() {
  if (g_scratch == nullptr) return;
  std::error_code ec;
  for (const auto& d : *g_scratch) fs::remove_all(d, ec);
}
}  // namespace

std::string SourceDir() { return TEXTGEN_SOURCE_DIR; }

std::string ModelsDir() {
  const char* env = std::getenv("TEXTGEN_MODELS");
  std::string dir =
      env != nullptr && *env != '\0' ? std::string(env) : SourceDir() + "/../shared/models";
  if (!fs::is_directory(dir)) {
    FAIL("models folder not found: " << dir << " (set TEXTGEN_MODELS)");
  }
  return dir;
}

std::string ReferenceDir() {
  const char* env = std::getenv("TEXTGEN_REFERENCE");
  if (env != nullptr && *env != '\0') return env;
  return ModelsDir() + "/../reference";
}

std::string ChatTemplatesDir() {
  const char* env = std::getenv("TEXTGEN_CHAT_TEMPLATES");
  if (env != nullptr && *env != '\0') return env;
  return ModelsDir() + "/../chat-templates";
}

std::string ModelPath(const std::string& name) { return ModelsDir() + "/" + name; }

std::string ScratchDir() {
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TMPDIR");
  fs::path base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  fs::path dir = base / ("textgen-test-" + std::to_string(::getpid()) + "-" +
                         std::to_string(counter.fetch_add(1)));
  fs::create_directories(dir);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_scratch == nullptr) {
    g_scratch = new std::vector<std::string>();
    std::atexit(RemoveScratch);
  }
  g_scratch->push_back(dir.string());
  return dir.string();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  REQUIRE(out.good());
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) FAIL("cannot read " << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

CommandResult RunCommand(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  CommandResult r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace textgen::testing
