// cli::FlagSet and its value parsers: values, the environment, and the exits (usage error 2,
// --help 0) checked in a forked child.
#include "cli/flags.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "catch2/catch.hpp"

namespace textgen::cli {
namespace flags_test {

template <typename T>
std::string Check(const ValueParser<T>& parse, const std::string& value, T* out = nullptr) {
  T v{};
  return parse(value, out != nullptr ? out : &v);
}

TEST_CASE("value parsers accept their values and say what they expected", "[cli]") {
  int64_t i = 0;
  CHECK(Check(IntIn(1, 10), "10", &i).empty());
  CHECK(i == 10);
  CHECK(Check(IntIn(1, 10), "11") == "an integer in [1, 10]");
  CHECK(Check(IntIn(1, 10), "0") == "an integer in [1, 10]");
  CHECK(Check(IntIn(1, 10), "5x") == "an integer in [1, 10]");
  CHECK(Check(IntIn(1, 10), "") == "an integer in [1, 10]");
  int narrow = 0;
  CHECK(Check(Int<int>(0, 4096), "4096", &narrow).empty());
  CHECK(narrow == 4096);

  uint64_t seed = 0;
  CHECK(Check(Uint64(), "18446744073709551615", &seed).empty());
  CHECK(seed == 18446744073709551615ull);
  CHECK(Check(Uint64(), "-1") == "an unsigned integer");

  float f = 0;
  CHECK(Check(Float(), "0.5", &f).empty());
  CHECK(f == 0.5f);
  CHECK(Check(Float(), "nan") == "a number");
  CHECK(Check(Float(), "1e39") == "a number");  // beyond float

  absl::Duration d;
  CHECK(Check(Seconds(1), "2.5", &d).empty());
  CHECK(d == absl::Milliseconds(2500));
  CHECK(Check(Seconds(1), "0.5") == "a number of seconds >= 1");
  CHECK(Check(Seconds(0), "nan") == "a number of seconds >= 0");

  for (const char* good : {"127.0.0.1:0", "[::1]:65535", "example.com:80", "0.0.0.0:50051"}) {
    CHECK(Check(HostPort(), good).empty());
  }
  for (const char* bad : {"127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1", ":80", "h:x", ""}) {
    INFO(bad);
    CHECK(Check(HostPort(), bad) == "HOST:PORT with a port in [0, 65535]");
  }

  CHECK(Check(OneOf({"f32", "bf16", "auto"}), "bf16").empty());
  CHECK(Check(OneOf({"f32", "bf16", "auto"}), "f16") == "f32, bf16 or auto");
  CHECK(Check(OneOf({"true", "false"}), "yes") == "true or false");
  bool on = false;
  CHECK(Check(OnOff(), "on", &on).empty());
  CHECK(on);
  CHECK(Check(OnOff(), "off", &on).empty());
  CHECK(!on);
  CHECK(Check(OnOff(), "ON") == "on or off");
  CHECK(Check(OnOff(), "1") == "on or off");
  for (const bool automatic : {true, false}) {
    const auto parser = AutoOnOff([automatic] { return automatic; });
    CHECK(Check(parser, "auto", &on).empty());
    CHECK(on == automatic);
    CHECK(Check(parser, "on", &on).empty());
    CHECK(on);
    CHECK(Check(parser, "off", &on).empty());
    CHECK(!on);
    CHECK(Check(parser, "yes") == "auto, on or off");
  }
  std::optional<bool> maybe = true;
  CHECK(Check(AutoOrOnOff(), "auto", &maybe).empty());
  CHECK(!maybe.has_value());
  CHECK(Check(AutoOrOnOff(), "off", &maybe).empty());
  CHECK(maybe == false);
  CHECK(Check(AutoOrOnOff(), "on", &maybe).empty());
  CHECK(maybe == true);
  CHECK(Check(AutoOrOnOff(), "On") == "auto, on or off");

  std::vector<int32_t> ids;
  CHECK(Check(IntList(), "1, 2,3", &ids).empty());
  CHECK(ids == std::vector<int32_t>{1, 2, 3});
  CHECK(Check(IntList(), "1,x") == "comma-separated integers");
  CHECK(Check(IntList(), ",") == "comma-separated integers");
  CHECK(Check(NonEmpty(), "") == "not empty");
}

struct Values {
  int n = 7;
  std::string listen = "127.0.0.1:1";
  std::string name;
  std::vector<std::string> stops;
  bool json = false;
};

// Flags of a made-up tool, with TEXTGEN_TEST_ variables when `env`.
void AddFlags(FlagSet& f, Values& v, bool env) {
  if (env) f.SetEnvPrefix("TEXTGEN_TEST_");
  f.Add("--n", &v.n, Int<int>(1, 100), "N", "a count");
  f.Add("--listen", &v.listen, HostPort(), "HOST:PORT", "an address");
  f.Add("--name", &v.name, Text(), "TEXT", "a name");
  f.AddWith<std::string>("--stop", Text(), "TEXT", "repeatable",
                         [&v](std::string s) { v.stops.push_back(std::move(s)); });
  f.Flag("--json", &v.json, "print JSON");
}

Values ParseArgs(std::vector<std::string> args, bool env = false) {
  Values v;
  FlagSet f("tool", "Usage: tool [flags]", Wording::kExpected);
  AddFlags(f, v, env);
  f.Parse(std::move(args));
  return v;
}

TEST_CASE("flags take --flag VALUE and --flag=VALUE, the last one wins", "[cli]") {
  Values v = ParseArgs(
      {"--n", "5", "--listen=0.0.0.0:80", "--name=", "--stop", "a", "--stop=b", "--json"});
  CHECK(v.n == 5);
  CHECK(v.listen == "0.0.0.0:80");
  CHECK(v.name.empty());
  CHECK(v.stops == std::vector<std::string>{"a", "b"});
  CHECK(v.json);
  CHECK(ParseArgs({"--n", "1", "--n", "2"}).n == 2);
  CHECK(ParseArgs({"--name", "--n"}).name == "--n");  // a value is taken as given
  CHECK(ParseArgs({"--name", "-5"}).name == "-5");
  const Values defaults = ParseArgs({});
  CHECK(defaults.n == 7);
  CHECK(!defaults.json);
}

TEST_CASE("variables set flags, an empty one is unset, the command line wins", "[cli]") {
  ::setenv("TEXTGEN_TEST_N", "9", 1);
  ::setenv("TEXTGEN_TEST_LISTEN", "", 1);
  CHECK(ParseArgs({}, true).n == 9);
  CHECK(ParseArgs({}, true).listen == "127.0.0.1:1");
  CHECK(ParseArgs({"--n", "3"}, true).n == 3);
  CHECK(ParseArgs({}, false).n == 7);  // no prefix, no variables
  ::unsetenv("TEXTGEN_TEST_N");
  ::unsetenv("TEXTGEN_TEST_LISTEN");
}

struct Exit {
  int code = -1;
  std::string out;  // stdout and stderr
};

// Runs `body` in a child whose stdout and stderr are captured.
Exit RunInChild(const std::function<void()>& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    body();
    std::fflush(nullptr);
    ::_exit(0);
  }
  ::close(fds[1]);
  Exit e;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) e.out.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  e.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return e;
}

Exit ParseInChild(std::vector<std::string> args, Wording wording = Wording::kExpected,
                  bool env = false) {
  return RunInChild([&] {
    Values v;
    FlagSet f("tool", "Usage: tool [flags]", wording);
    AddFlags(f, v, env);
    f.Parse(args);
  });
}

TEST_CASE("a bad value exits 2 naming the flag, or the variable it came from", "[cli]") {
  Exit e = ParseInChild({"--n", "0"});
  CHECK(e.code == 2);
  CHECK(e.out == "tool: --n: expected an integer in [1, 100], got '0'\n(see --help)\n");
  e = ParseInChild({"--listen", "127.0.0.1:99999"}, Wording::kMustBe);
  CHECK(e.code == 2);
  CHECK_THAT(e.out, Catch::Contains(
                        "--listen must be HOST:PORT with a port in [0, 65535], got \"127.0.0.1"));
  e = ParseInChild({"--n", "x", "--n", "5"});  // an earlier bad value is not hidden
  CHECK(e.code == 2);
  CHECK_THAT(e.out, Catch::Contains("--n: expected an integer"));

  ::setenv("TEXTGEN_TEST_LISTEN", "127.0.0.1:99999", 1);
  e = ParseInChild({}, Wording::kMustBe, true);
  CHECK(e.code == 2);
  CHECK_THAT(e.out, Catch::Contains("TEXTGEN_TEST_LISTEN must be HOST:PORT"));
  CHECK(ParseInChild({"--listen", "127.0.0.1:2"}, Wording::kMustBe, true).code == 0);
  ::unsetenv("TEXTGEN_TEST_LISTEN");
}

TEST_CASE("unknown flags, stray arguments and missing values exit 2", "[cli]") {
  Exit e = ParseInChild({"--bogus"});
  CHECK(e.code == 2);
  CHECK_THAT(e.out, Catch::Contains("unknown flag --bogus"));
  e = ParseInChild({"stray"});
  CHECK(e.code == 2);
  CHECK_THAT(e.out, Catch::Contains("unexpected argument 'stray'"));
  e = ParseInChild({"--n"});
  CHECK(e.code == 2);
  CHECK_THAT(e.out, Catch::Contains("--n"));
  e = ParseInChild({"--stop", "a", "b"});  // one value per --stop
  CHECK(e.code == 2);
  CHECK_THAT(e.out, Catch::Contains("'b'"));
  CHECK(ParseInChild({"--n", "5"}).code == 0);
}

TEST_CASE("--help prints the generated help and exits 0, even beside a bad value", "[cli]") {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--help"}, {"-h"}, {"--n", "0", "--help"}, {"--help", "--n", "0"}}) {
    Exit e = ParseInChild(args);
    CHECK(e.code == 0);
    CHECK_THAT(e.out, Catch::StartsWith("Usage: tool [flags]"));
    CHECK_THAT(e.out, Catch::Contains("  --n N ") && Catch::Contains("a count"));
    CHECK_THAT(e.out, Catch::Contains("  --listen HOST:PORT ") && Catch::Contains("  --json "));
  }
}

}  // namespace flags_test
}  // namespace textgen::cli
