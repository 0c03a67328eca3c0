// The command-line flags of every textgen binary, on CLI11: "--flag VALUE" and "--flag=VALUE",
// optional environment variables (a flag on the command line wins; an empty variable counts as
// unset), a generated --help (exit 0) and one wording for bad values (exit 2):
//
//   cli::FlagSet flags("textgen-server", kDescription, cli::Wording::kMustBe);
//   flags.SetEnvPrefix("TEXTGEN_");  // --listen also reads TEXTGEN_LISTEN
//   flags.Add("--listen", &listen, cli::HostPort(), "HOST:PORT", "address to listen on");
//   flags.Add("--threads", &threads, cli::Int<int>(0, 1024), "N", "compute threads");
//   flags.Parse(argc, argv);
//
// A bad value names the flag, or the variable it came from ("TEXTGEN_LISTEN must be ...").
#ifndef TEXTGEN_CLI_FLAGS_H_
#define TEXTGEN_CLI_FLAGS_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "CLI/App.hpp"
#include "absl/time/time.h"

namespace textgen::cli {

// Checks one value and converts it: returns "" and sets *out when `value` is acceptable, else
// what a value has to be ("an integer in [1, 64]"), which the usage error quotes.
template <typename T>
using ValueParser = std::function<std::string(const std::string& value, T* out)>;

// Any text.
ValueParser<std::string> Text();
// Any text but the empty one.
ValueParser<std::string> NonEmpty();
// A decimal integer in [min, max].
ValueParser<int64_t> IntIn(int64_t min, int64_t max);
// IntIn converted to T (int, uint32_t, size_t...); min and max must fit T.
template <typename T>
ValueParser<T> Int(int64_t min, int64_t max = std::numeric_limits<T>::max()) {
  return [in = IntIn(min, max)](const std::string& value, T* out) {
    int64_t v = 0;
    std::string expected = in(value, &v);
    if (expected.empty()) *out = static_cast<T>(v);
    return expected;
  };
}
// A decimal integer in [0, 2^64) (seeds).
ValueParser<uint64_t> Uint64();
// A finite number in [min, max].
ValueParser<double> Number(double min, double max = std::numeric_limits<double>::infinity());
// A finite number that fits a float.
ValueParser<float> Float();
// A number of seconds in [min, 1e9].
ValueParser<absl::Duration> Seconds(double min);
// HOST:PORT with a non-empty host and a port in [0, 65535] (gRPC would take 99999 modulo 65536).
ValueParser<std::string> HostPort();
// One of `words`.
ValueParser<std::string> OneOf(std::vector<std::string> words);
// "on" (true) or "off" (false).
ValueParser<bool> OnOff();
// "auto" (`automatic()`), "on" (true) or "off" (false).
ValueParser<bool> AutoOnOff(std::function<bool()> automatic);
// "auto" (nullopt: the component decides later), "on" (true) or "off" (false).
ValueParser<std::optional<bool>> AutoOrOnOff();
// Comma-separated 32-bit integers (token ids), at least one.
ValueParser<std::vector<int32_t>> IntList();

// How a bad value reads: kMustBe "--listen must be HOST:PORT ..., got \"x\"" (textgen-server),
// kExpected "--top-k: expected an integer in [0, 4294967295], got 'x'" (the other tools).
enum class Wording { kMustBe, kExpected };

class FlagSet {
 public:
  // `program` starts every error message; `description` heads --help.
  FlagSet(std::string program, std::string description, Wording wording);
  FlagSet(const FlagSet&) = delete;
  FlagSet& operator=(const FlagSet&) = delete;

  // Flags added from here on also read PREFIX + their name in capitals, '_' for '-'
  // (--kv-cache-mib -> TEXTGEN_KV_CACHE_MIB).
  void SetEnvPrefix(std::string prefix) { env_prefix_ = std::move(prefix); }

  // --name VALUE: `parse` checks and converts VALUE, then `set` takes it. `type` names the value
  // in --help ("N", "HOST:PORT", "f32|bf16"). A repeated flag calls `set` for each value in
  // order (the last wins, or `set` appends).
  template <typename T>
  CLI::Option* AddWith(const std::string& name, ValueParser<T> parse, const std::string& type,
                       const std::string& help, std::function<void(T)> set) {
    return AddOption(name, type, help, [this, name, parse, set](const std::string& value) {
      T v{};
      std::string expected = parse(value, &v);
      if (!expected.empty()) throw BadValue{name, value, std::move(expected)};
      set(std::move(v));
    });
  }
  // --name VALUE into *out.
  template <typename T>
  CLI::Option* Add(const std::string& name, T* out, ValueParser<T> parse, const std::string& type,
                   const std::string& help) {
    return AddWith<T>(name, std::move(parse), type, help, [out](T v) { *out = std::move(v); });
  }
  // --name without a value: sets *out to true.
  CLI::Option* Flag(const std::string& name, bool* out, const std::string& help);
  // --name without a value: calls `on`.
  CLI::Option* Flag(const std::string& name, const std::string& help, std::function<void()> on);

  // Flags added from here on are listed under this heading in --help ("" = "Flags"); one line.
  void SetGroup(std::string group) { group_ = std::move(group); }
  // Text printed after the flags in --help.
  void SetFooter(const std::string& footer) { app_.footer(footer); }

  // Parses the command line (argv[0] is the program); --help prints the help and exits 0, a
  // usage error exits 2.
  void Parse(int argc, char** argv);
  // The same for arguments without the program name (a subcommand's).
  void Parse(std::vector<std::string> args);

  // Whether the flag was given, on the command line or by its variable.
  bool Given(const std::string& name) const;
  // Prints "PROGRAM: MESSAGE" and exits 2: for checks across flags after Parse.
  [[noreturn]] void Fail(const std::string& message) const;

  CLI::App& app() { return app_; }

 private:
  struct BadValue {
    std::string flag;
    std::string value;
    std::string expected;
  };

  CLI::Option* AddOption(const std::string& name, const std::string& type, const std::string& help,
                         std::function<void(const std::string&)> set);
  CLI::Option* Finish(CLI::Option* option, const std::string& name);
  // Runs CLI11 on reversed arguments and turns its errors into ours.
  void ParseReversed(std::vector<std::string> reversed);
  std::string Describe(const BadValue& bad) const;
  [[noreturn]] void PrintHelp() const;

  std::string program_;
  Wording wording_;
  std::string env_prefix_;
  std::string group_;
  CLI::App app_;
};

}  // namespace textgen::cli

#endif  // TEXTGEN_CLI_FLAGS_H_
