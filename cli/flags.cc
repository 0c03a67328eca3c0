#include "cli/flags.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace textgen::cli {
namespace {

// CLI11's help, minus what our descriptions say better: a flag is listed as "--name TYPE" (no
// "=default", "(Env:...)" or "REQUIRED"; the description gives the default), and the usage
// line is the description's own (each program knows its synopsis).
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    return opt->get_type_size() == 0 ? "" : " " + opt->get_type_name();
  }
  // The description (with the program's own usage line), the groups one blank line apart
  // (CLI11's own puts two), the footer.
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const override {
    std::string out = make_description(app);
    for (const std::string& group : app->get_groups()) {
      const std::vector<const CLI::Option*> options = app->get_options(
          [&group](const CLI::Option* o) { return o->get_group() == group && o->nonpositional(); });
      if (!group.empty() && !options.empty()) out += make_group(group, false, options);
    }
    return out + make_footer(app);
  }
};

// "a, b or c".
std::string Alternatives(const std::vector<std::string>& words) {
  if (words.size() < 2) return absl::StrJoin(words, "");
  return absl::StrCat(absl::StrJoin(words.begin(), words.end() - 1, ", "), " or ", words.back());
}

}  // namespace

ValueParser<std::string> Text() {
  return [](const std::string& value, std::string* out) {
    *out = value;
    return std::string();
  };
}

ValueParser<std::string> NonEmpty() {
  return [](const std::string& value, std::string* out) {
    if (value.empty()) return std::string("not empty");
    *out = value;
    return std::string();
  };
}

ValueParser<int64_t> IntIn(int64_t min, int64_t max) {
  return [min, max](const std::string& value, int64_t* out) {
    if (!absl::SimpleAtoi(value, out) || *out < min || *out > max) {
      return absl::StrCat("an integer in [", min, ", ", max, "]");
    }
    return std::string();
  };
}

ValueParser<uint64_t> Uint64() {
  return [](const std::string& value, uint64_t* out) {
    // SimpleAtoi takes "-1" for an unsigned type on some Abseil versions.
    if (value.empty() || value[0] == '-' || !absl::SimpleAtoi(value, out)) {
      return std::string("an unsigned integer");
    }
    return std::string();
  };
}

ValueParser<double> Number(double min, double max) {
  return [min, max](const std::string& value, double* out) {
    if (!absl::SimpleAtod(value, out) || !std::isfinite(*out) || *out < min || *out > max) {
      return std::isinf(max) ? absl::StrCat("a number >= ", min)
                             : absl::StrCat("a number in [", min, ", ", max, "]");
    }
    return std::string();
  };
}

ValueParser<float> Float() {
  return [](const std::string& value, float* out) {
    if (!absl::SimpleAtof(value, out) || !std::isfinite(*out)) return std::string("a number");
    return std::string();
  };
}

ValueParser<absl::Duration> Seconds(double min) {
  return [min](const std::string& value, absl::Duration* out) {
    double seconds = 0;
    if (!absl::SimpleAtod(value, &seconds) || !(seconds >= min && seconds <= 1e9)) {
      return absl::StrCat("a number of seconds >= ", min);
    }
    *out = absl::Seconds(seconds);
    return std::string();
  };
}

ValueParser<std::string> HostPort() {
  return [](const std::string& value, std::string* out) {
    const size_t colon = value.rfind(':');
    int port = -1;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 0 || port > 65535) {
      return std::string("HOST:PORT with a port in [0, 65535]");
    }
    *out = value;
    return std::string();
  };
}

ValueParser<std::string> OneOf(std::vector<std::string> words) {
  return [words = std::move(words)](const std::string& value, std::string* out) {
    if (std::find(words.begin(), words.end(), value) == words.end()) return Alternatives(words);
    *out = value;
    return std::string();
  };
}

ValueParser<bool> OnOff() {
  return [](const std::string& value, bool* out) {
    if (value != "on" && value != "off") return std::string("on or off");
    *out = value == "on";
    return std::string();
  };
}

ValueParser<bool> AutoOnOff(std::function<bool()> automatic) {
  return [automatic = std::move(automatic)](const std::string& value, bool* out) {
    if (value != "auto" && value != "on" && value != "off") return std::string("auto, on or off");
    *out = value == "auto" ? automatic() : value == "on";
    return std::string();
  };
}

ValueParser<std::optional<bool>> AutoOrOnOff() {
  return [](const std::string& value, std::optional<bool>* out) {
    if (value != "auto" && value != "on" && value != "off") return std::string("auto, on or off");
    *out = value == "auto" ? std::nullopt : std::optional<bool>(value == "on");
    return std::string();
  };
}

ValueParser<std::vector<int32_t>> IntList() {
  return [](const std::string& value, std::vector<int32_t>* out) {
    out->clear();
    for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
      int32_t id = 0;
      if (!absl::SimpleAtoi(part, &id)) return std::string("comma-separated integers");
      out->push_back(id);
    }
    return out->empty() ? std::string("comma-separated integers") : std::string();
  };
}

FlagSet::FlagSet(std::string program, std::string description, Wording wording)
    : program_(std::move(program)), wording_(wording), app_(std::move(description), program_) {
  app_.formatter(std::make_shared<HelpFormatter>());
  app_.get_formatter()->column_width(30);
  app_.set_help_flag("-h,--help", "this text")->group("Flags");
}

CLI::Option* FlagSet::Finish(CLI::Option* option, const std::string& name) {
  option->group(group_.empty() ? "Flags" : group_);
  if (!env_prefix_.empty()) {
    std::string var = env_prefix_;
    for (char c : name.substr(2)) var += c == '-' ? '_' : static_cast<char>(std::toupper(c));
    option->envname(var);
  }
  return option;
}

CLI::Option* FlagSet::AddOption(const std::string& name, const std::string& type,
                                const std::string& help,
                                std::function<void(const std::string&)> set) {
  // One value per occurrence ("--stop a b" leaves b unexpected). Every occurrence is checked
  // and set in order, so the last one wins and a bad earlier one is still an error.
  CLI::Option* option = app_.add_option(
      name,
      [set = std::move(set)](const CLI::results_t& values) {
        for (const std::string& v : values) set(v);
        return true;
      },
      help);
  option->type_name(type)->type_size(1)->expected(1)->multi_option_policy(
      CLI::MultiOptionPolicy::TakeAll);
  return Finish(option, name);
}

CLI::Option* FlagSet::Flag(const std::string& name, bool* out, const std::string& help) {
  return Flag(name, help, [out] { *out = true; });
}

CLI::Option* FlagSet::Flag(const std::string& name, const std::string& help,
                           std::function<void()> on) {
  CLI::Option* option = app_.add_flag_callback(name, std::move(on), help);
  option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  return Finish(option, name);
}

bool FlagSet::Given(const std::string& name) const { return app_.get_option(name)->count() > 0; }

void FlagSet::Fail(const std::string& message) const {
  std::fprintf(stderr, "%s: %s\n(see --help)\n", program_.c_str(), message.c_str());
  std::exit(2);
}

void FlagSet::Parse(int argc, char** argv) {
  Parse(std::vector<std::string>(argv + std::min(argc, 1), argv + argc));
}

void FlagSet::Parse(std::vector<std::string> args) {
  std::vector<std::string> reversed;
  for (auto it = args.rbegin(); it != args.rend(); ++it) {
    // CLI11 reads "--flag=" as "--flag" and takes the next argument as its value; it means
    // the empty value.
    if (it->starts_with("--") && it->back() == '=') {
      reversed.push_back("");
      reversed.push_back(it->substr(0, it->size() - 1));
    } else {
      reversed.push_back(*it);
    }
  }
  ParseReversed(std::move(reversed));
}

void FlagSet::ParseReversed(std::vector<std::string> reversed) {
  // The message is made inside the handlers and the process ends outside them, so that no
  // exception is in flight at exit.
  std::string error;
  bool help = false;
  try {
    app_.parse(reversed);
  } catch (const BadValue& bad) {
    // CLI11 checks values before it looks at --help; asking for help still gets it.
    help = app_.get_help_ptr()->count() > 0;
    error = Describe(bad);
  } catch (const CLI::CallForHelp&) {
    help = true;
  } catch (const CLI::ExtrasError&) {
    const std::string arg = app_.remaining().empty() ? "" : app_.remaining().front();
    error = arg.starts_with("-") ? absl::StrCat("unknown flag ", arg)
                                 : absl::StrCat("unexpected argument '", arg, "'");
  } catch (const CLI::ParseError& e) {
    error = e.what();
  }
  if (help) PrintHelp();
  if (!error.empty()) Fail(error);
}

void FlagSet::PrintHelp() const {
  std::fputs(app_.help().c_str(), stdout);
  std::exit(0);
}

std::string FlagSet::Describe(const BadValue& bad) const {
  const CLI::Option* option = app_.get_option(bad.flag);
  const std::vector<CLI::Option*> order = app_.parse_order();
  // A value that did not come from the command line came from the variable: name that.
  const bool from_env = !option->get_envname().empty() &&
                        std::find(order.begin(), order.end(), option) == order.end();
  const std::string& name = from_env ? option->get_envname() : bad.flag;
  if (wording_ == Wording::kMustBe) {
    return absl::StrCat(name, " must be ", bad.expected, ", got \"", bad.value, "\"");
  }
  return absl::StrCat(name, ": expected ", bad.expected, ", got '", bad.value, "'");
}

}  // namespace textgen::cli
