#include "engine/chat/tool_call_readers.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace {

using Step = BlockReader::Step;

// Matches one of a few literals byte by byte.
class LiteralMatcher {
 public:
  static constexpr int kNoMatch = -1;
  static constexpr int kPartial = -2;

  void Reset(std::vector<std::string_view> options) {
    options_ = std::move(options);
    seen_.clear();
  }
  // kNoMatch, kPartial, or the index of the option `c` completed.
  int Push(char c) {
    seen_.push_back(c);
    bool partial = false;
    for (size_t i = 0; i < options_.size(); ++i) {
      if (!std::string_view(options_[i]).starts_with(seen_)) continue;
      if (options_[i].size() == seen_.size()) return static_cast<int>(i);
      partial = true;
    }
    return partial ? kPartial : kNoMatch;
  }
  bool Started() const { return !seen_.empty(); }

 private:
  std::vector<std::string_view> options_;
  std::string seen_;
};

std::string_view StripSpace(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

// One call object. Reports to the sink as parts become certain; on an error or at the end of
// the answer it ends the call it began.
class JsonCallObject {
 public:
  enum class Result { kContinue, kDone, kError };

  explicit JsonCallObject(const JsonCallShape* shape) : shape_(shape) {}

  Result Push(char c, CallSink& sink) {
    const Result r = Step(c, sink);
    if (r == Result::kError && began_ && !ended_) {
      ended_ = true;
      sink.EndCall(args_done_);
    }
    return r;
  }

  void Finish(CallSink& sink) {
    if (began_ && !ended_) {
      ended_ = true;
      sink.EndCall(false);
    }
  }

 private:
  enum class State {
    kStart,
    kKeyOrEnd,
    kKey,
    kKeyChars,
    kColon,
    kValue,
    kName,
    kId,
    kArgs,
    kSkip,
    kAfterValue,
  };

  bool IsArgumentKey(const std::string& key) const {
    for (const std::string& k : shape_->argument_keys) {
      if (k == key) return true;
    }
    return false;
  }

  // Begins the call once its name is known and its arguments have started.
  bool MaybeBegin(CallSink& sink) {
    if (began_ || !name_done_ || !args_started_ || shape_->wait_for_close) return true;
    return Begin(sink);
  }

  bool Begin(CallSink& sink) {
    if (!sink.BeginCall(name_, id_)) return false;
    began_ = true;
    if (!args_.empty()) sink.Arguments(args_);
    args_.clear();
    return true;
  }

  Result Close(CallSink& sink) {
    if (!name_done_) return Result::kError;
    if (!began_) {
      if (!args_started_) {
        args_ = "{}";  // a call without arguments
        args_started_ = args_done_ = true;
      }
      if (!Begin(sink)) return Result::kError;
    }
    ended_ = true;
    sink.EndCall(args_done_);
    return Result::kDone;
  }

  Result Step(char c, CallSink& sink) {
    switch (state_) {
      case State::kStart:
        if (IsJsonSpace(c)) return Result::kContinue;
        if (c != '{') return Result::kError;
        level_ = 1;
        state_ = State::kKeyOrEnd;
        return Result::kContinue;
      case State::kKeyOrEnd:
      case State::kKey:
        if (IsJsonSpace(c)) return Result::kContinue;
        if (c == '}' && state_ == State::kKeyOrEnd) return CloseLevel(sink);
        if (c != '"') return Result::kError;
        key_.clear();
        decoder_ = JsonStringDecoder();
        state_ = State::kKeyChars;
        return Result::kContinue;
      case State::kKeyChars: {
        const auto r = decoder_.Push(c, &key_);
        if (r == JsonStringDecoder::Result::kError) return Result::kError;
        if (r == JsonStringDecoder::Result::kContinue) return Result::kContinue;
        const bool known = key_ == "name" || key_ == "id" || key_ == "type" || key_ == "function" ||
                           IsArgumentKey(key_);
        if (!known) return Result::kError;
        state_ = State::kColon;
        return Result::kContinue;
      }
      case State::kColon:
        if (IsJsonSpace(c)) return Result::kContinue;
        if (c != ':') return Result::kError;
        state_ = State::kValue;
        return Result::kContinue;
      case State::kValue:
        if (IsJsonSpace(c)) return Result::kContinue;
        return ValueStart(c, sink);
      case State::kName:
      case State::kId: {
        std::string& out = state_ == State::kName ? name_ : id_;
        const auto r = decoder_.Push(c, &out);
        if (r == JsonStringDecoder::Result::kError) return Result::kError;
        if (r == JsonStringDecoder::Result::kDone) {
          (state_ == State::kName ? name_done_ : id_done_) = true;
          state_ = State::kAfterValue;
          if (!MaybeBegin(sink)) return Result::kError;
        }
        return Result::kContinue;
      }
      case State::kArgs: {
        const auto r = scanner_.Push(c);
        if (r == JsonScanner::Result::kError) return Result::kError;
        if (began_) {
          sink.Arguments(std::string_view(&c, 1));
        } else {
          args_.push_back(c);
        }
        if (r == JsonScanner::Result::kDone) {
          args_done_ = true;
          state_ = State::kAfterValue;
        }
        return Result::kContinue;
      }
      case State::kSkip: {
        const auto r = scanner_.Push(c);
        if (r == JsonScanner::Result::kError) return Result::kError;
        if (r == JsonScanner::Result::kDone) state_ = State::kAfterValue;
        if (r == JsonScanner::Result::kDoneBefore) {
          state_ = State::kAfterValue;
          return Step(c, sink);
        }
        return Result::kContinue;
      }
      case State::kAfterValue:
        if (IsJsonSpace(c)) return Result::kContinue;
        if (c == ',') {
          state_ = State::kKey;
          return Result::kContinue;
        }
        if (c == '}') return CloseLevel(sink);
        return Result::kError;
    }
    return Result::kError;
  }

  Result ValueStart(char c, CallSink& sink) {
    if (key_ == "name" || key_ == "id") {
      if (c != '"') {
        if (key_ == "name") return Result::kError;
        scanner_ = JsonScanner();  // a numeric id: skipped, one is generated
        state_ = State::kSkip;
        return Step(c, sink);
      }
      if ((key_ == "name" ? name_done_ : id_done_)) return Result::kError;  // repeated key
      (key_ == "name" ? name_ : id_).clear();
      decoder_ = JsonStringDecoder();
      state_ = key_ == "name" ? State::kName : State::kId;
      return Result::kContinue;
    }
    if (key_ == "function") {
      if (c != '{' || level_ != 1) return Result::kError;
      level_ = 2;
      state_ = State::kKeyOrEnd;
      return Result::kContinue;
    }
    if (IsArgumentKey(key_)) {
      if (c != '{' || args_started_) return Result::kError;
      args_started_ = true;
      scanner_ = JsonScanner();
      state_ = State::kArgs;
      if (!MaybeBegin(sink)) return Result::kError;
      return Step(c, sink);
    }
    scanner_ = JsonScanner();  // "type": any value, ignored
    state_ = State::kSkip;
    return Step(c, sink);
  }

  Result CloseLevel(CallSink& sink) {
    if (--level_ > 0) {
      state_ = State::kAfterValue;
      return Result::kContinue;
    }
    return Close(sink);
  }

  const JsonCallShape* shape_;
  State state_ = State::kStart;
  int level_ = 0;  // 1 in the call object, 2 inside its "function" object
  std::string key_;
  JsonStringDecoder decoder_;
  JsonScanner scanner_;
  std::string name_, id_;
  bool name_done_ = false, id_done_ = false;
  std::string args_;  // arguments read before the call could begin
  bool args_started_ = false, args_done_ = false;
  bool began_ = false, ended_ = false;
};

// A call object, or a JSON array of them.
class JsonCallReader : public BlockReader {
 public:
  JsonCallReader(JsonCallShape shape, bool allow_list)
      : shape_(std::move(shape)), allow_list_(allow_list) {}

  Step Push(char c, CallSink& sink) override {
    switch (state_) {
      case State::kStart:
        if (IsJsonSpace(c)) return Step::kContinue;
        if (c == '[' && allow_list_) {
          in_list_ = true;
          state_ = State::kListValue;
          return Step::kContinue;
        }
        return StartObject(c, sink);
      case State::kListValue:
        if (IsJsonSpace(c)) return Step::kContinue;
        if (c == ']') return Step::kEnd;
        return StartObject(c, sink);
      case State::kObject: {
        const auto r = object_->Push(c, sink);
        if (r == JsonCallObject::Result::kError) return Step::kError;
        if (r == JsonCallObject::Result::kDone) {
          object_.reset();
          if (!in_list_) return Step::kEnd;
          state_ = State::kAfterObject;
        }
        return Step::kContinue;
      }
      case State::kAfterObject:
        if (IsJsonSpace(c)) return Step::kContinue;
        if (c == ',') {
          state_ = State::kListValue;
          return Step::kContinue;
        }
        if (c == ']') return Step::kEnd;
        return Step::kError;
    }
    return Step::kError;
  }

  bool Finish(CallSink& sink) override {
    if (object_) object_->Finish(sink);
    return false;
  }

 private:
  enum class State { kStart, kListValue, kObject, kAfterObject };

  Step StartObject(char c, CallSink& sink) {
    if (c != '{') return Step::kError;
    object_ = std::make_unique<JsonCallObject>(&shape_);
    state_ = State::kObject;
    return Push(c, sink);
  }

  JsonCallShape shape_;
  bool allow_list_;
  bool in_list_ = false;
  State state_ = State::kStart;
  std::unique_ptr<JsonCallObject> object_;
};

class GenericJsonReader : public BlockReader {
 public:
  Step Push(char c, CallSink& sink) override {
    switch (state_) {
      case State::kStart:
        if (IsJsonSpace(c)) return Step::kContinue;
        if (c != '{') return Step::kError;
        state_ = State::kKey;
        return Step::kContinue;
      case State::kKey:
        if (IsJsonSpace(c)) return Step::kContinue;
        if (c != '"') return Step::kError;
        state_ = State::kKeyChars;
        return Step::kContinue;
      case State::kKeyChars: {
        const auto r = decoder_.Push(c, &key_);
        if (r == JsonStringDecoder::Result::kError) return Step::kError;
        if (r == JsonStringDecoder::Result::kDone) {
          if (key_ != "tool_calls" && key_ != "tool_call" && key_ != "response") {
            return Step::kError;
          }
          state_ = State::kColon;
        }
        return Step::kContinue;
      }
      case State::kColon:
        if (IsJsonSpace(c)) return Step::kContinue;
        if (c != ':') return Step::kError;
        state_ = State::kValue;
        return Step::kContinue;
      case State::kValue:
        if (IsJsonSpace(c)) return Step::kContinue;
        if (key_ == "response") {
          if (c != '"') return Step::kError;
          state_ = State::kResponse;
          return Step::kContinue;
        }
        if (c != (key_ == "tool_calls" ? '[' : '{')) return Step::kError;
        calls_ = std::make_unique<JsonCallReader>(JsonCallShape{{"arguments"}, false},
                                                  key_ == "tool_calls");
        state_ = State::kCalls;
        return Push(c, sink);
      case State::kResponse: {
        std::string text;
        const auto r = response_.Push(c, &text);
        if (r == JsonStringDecoder::Result::kError) return Step::kError;
        if (!text.empty()) sink.Content(text);
        if (r == JsonStringDecoder::Result::kDone) state_ = State::kClose;
        return Step::kContinue;
      }
      case State::kCalls: {
        const Step s = calls_->Push(c, sink);
        if (s == Step::kEnd) state_ = State::kClose;
        return s == Step::kEnd ? Step::kContinue : s;
      }
      case State::kClose:
        if (IsJsonSpace(c)) return Step::kContinue;
        return c == '}' ? Step::kEnd : Step::kError;
    }
    return Step::kError;
  }

  bool Finish(CallSink& sink) override {
    if (calls_) calls_->Finish(sink);
    return false;
  }

 private:
  enum class State { kStart, kKey, kKeyChars, kColon, kValue, kResponse, kCalls, kClose };
  State state_ = State::kStart;
  std::string key_;
  JsonStringDecoder decoder_, response_;
  std::unique_ptr<JsonCallReader> calls_;
};

class MistralArgsReader : public BlockReader {
 public:
  Step Push(char c, CallSink& sink) override {
    switch (state_) {
      case State::kName:
        if (name_.empty() && IsJsonSpace(c)) return Step::kContinue;
        if (c == '[' && !name_.empty()) {
          marker_.Reset({"[ARGS]", "[CALL_ID]"});
          state_ = State::kMarker;
          return Push(c, sink);
        }
        if (!IsNameChar(c) || name_.size() >= 64) return Step::kError;
        name_.push_back(c);
        return Step::kContinue;
      case State::kMarker: {
        const int m = marker_.Push(c);
        if (m == LiteralMatcher::kNoMatch) return Step::kError;
        if (m == 0) state_ = State::kArgsStart;
        if (m == 1) state_ = State::kCallId;
        return Step::kContinue;
      }
      case State::kCallId:
        if (c == '[' && !id_.empty()) {
          marker_.Reset({"[ARGS]"});
          state_ = State::kMarker;
          return Push(c, sink);
        }
        if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) || id_.size() >= 64) {
          return Step::kError;
        }
        id_.push_back(c);
        return Step::kContinue;
      case State::kArgsStart:
        if (IsJsonSpace(c)) return Step::kContinue;
        if (c != '{' || !sink.BeginCall(name_, id_)) return Step::kError;
        began_ = true;
        state_ = State::kArgs;
        return Push(c, sink);
      case State::kArgs: {
        const auto r = scanner_.Push(c);
        if (r == JsonScanner::Result::kError) {
          End(sink, false);
          return Step::kError;
        }
        sink.Arguments(std::string_view(&c, 1));
        if (r == JsonScanner::Result::kDone) {
          End(sink, true);
          return Step::kEnd;
        }
        return Step::kContinue;
      }
    }
    return Step::kError;
  }

  bool Finish(CallSink& sink) override {
    End(sink, false);
    return false;
  }

 private:
  enum class State { kName, kMarker, kCallId, kArgsStart, kArgs };
  void End(CallSink& sink, bool complete) {
    if (began_) sink.EndCall(complete);
    began_ = false;
  }
  State state_ = State::kName;
  std::string name_, id_;
  LiteralMatcher marker_;
  JsonScanner scanner_;
  bool began_ = false;
};

const ToolSpec* FindTool(const std::vector<ToolSpec>* tools, std::string_view name) {
  for (const ToolSpec& t : *tools) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace

bool XmlParameterIsText(const ToolSpec* tool, const std::string& parameter) {
  if (tool == nullptr) return false;
  const nlohmann::ordered_json props =
      tool->parameters.value("properties", nlohmann::ordered_json::object());
  if (!props.is_object()) return false;
  const auto p = props.find(parameter);
  if (p == props.end() || !p->is_object()) return false;
  const auto type = p->find("type");
  if (type == p->end()) return false;
  if (type->is_string()) return *type == "string";
  if (type->is_array()) {
    for (const auto& t : *type) {
      if (t == "string") return true;
    }
  }
  return false;
}

namespace {

class QwenXmlReader : public BlockReader {
 public:
  explicit QwenXmlReader(const std::vector<ToolSpec>* tools) : tools_(tools) {
    marker_.Reset({"<function="});
  }

  Step Push(char c, CallSink& sink) override {
    switch (state_) {
      case State::kMarker: {
        if (!marker_.Started() && IsJsonSpace(c)) return Step::kContinue;
        const int m = marker_.Push(c);
        if (m == LiteralMatcher::kNoMatch) return Fail(sink);
        if (m == LiteralMatcher::kPartial) return Step::kContinue;
        return OnMarker(marker_options_[m], sink);
      }
      case State::kFunctionName:
      case State::kParameterName: {
        std::string& name = state_ == State::kFunctionName ? function_ : parameter_;
        if (c != '>') {
          if (c == '\n' || c == '<' || name.size() >= 128) return Fail(sink);
          name.push_back(c);
          return Step::kContinue;
        }
        if (name.empty()) return Fail(sink);
        return state_ == State::kFunctionName ? BeginFunction(sink) : BeginParameter(sink);
      }
      case State::kValue:
        return ValueByte(c, sink);
    }
    return Fail(sink);
  }

  bool Finish(CallSink& sink) override {
    if (began_) sink.EndCall(false);
    began_ = false;
    return false;
  }

 private:
  enum class State { kMarker, kFunctionName, kParameterName, kValue };
  static constexpr std::string_view kClose = "</parameter>";

  Step Fail(CallSink& sink) {
    Finish(sink);
    return Step::kError;
  }

  void Expect(std::vector<std::string_view> options) {
    marker_options_ = options;
    marker_.Reset(std::move(options));
    state_ = State::kMarker;
  }

  Step OnMarker(std::string_view marker, CallSink& sink) {
    if (marker == "<function=") {
      function_.clear();
      state_ = State::kFunctionName;
    } else if (marker == "<parameter=") {
      parameter_.clear();
      state_ = State::kParameterName;
    } else if (marker == "</function>") {
      sink.Arguments("}");
      sink.EndCall(true);
      began_ = false;
      Expect({"</tool_call>", "<function="});
    } else {  // </tool_call>
      return Step::kEnd;
    }
    return Step::kContinue;
  }

  Step BeginFunction(CallSink& sink) {
    tool_ = FindTool(tools_, function_);
    if (!sink.BeginCall(function_, "")) return Step::kError;
    began_ = true;
    first_parameter_ = true;
    sink.Arguments("{");
    Expect({"<parameter=", "</function>"});
    return Step::kContinue;
  }

  Step BeginParameter(CallSink& sink) {
    std::string head = first_parameter_ ? "\"" : ", \"";
    first_parameter_ = false;
    AppendJsonEscaped(parameter_, &head);
    head += "\": ";
    as_string_ = XmlParameterIsText(tool_, parameter_);
    if (as_string_) head += '"';
    sink.Arguments(head);
    value_.clear();
    at_value_start_ = true;
    state_ = State::kValue;
    return Step::kContinue;
  }

  // The value's text streams (escaped) once it cannot be the newline and "</parameter>" that
  // end it; JSON values wait for the end, where they are checked.
  Step ValueByte(char c, CallSink& sink) {
    if (at_value_start_) {
      at_value_start_ = false;
      if (c == '\n') return Step::kContinue;
    }
    value_.push_back(c);
    if (std::string_view(value_).ends_with(kClose)) {
      value_.resize(value_.size() - kClose.size());
      if (std::string_view(value_).ends_with("\n")) value_.pop_back();
      std::string out;
      if (as_string_) {
        AppendJsonEscaped(value_, &out);
        out += '"';
      } else if (nlohmann::json::accept(value_)) {
        out = std::string(StripSpace(value_));
      } else {
        out = "\"";
        AppendJsonEscaped(value_, &out);
        out += '"';
      }
      sink.Arguments(out);
      Expect({"<parameter=", "</function>"});
      return Step::kContinue;
    }
    if (!as_string_) return Step::kContinue;
    // Keep the longest tail that could still begin "\n</parameter>".
    size_t keep = 0;
    for (size_t n = std::min(value_.size(), kClose.size()); n > 0; --n) {
      const std::string_view tail = std::string_view(value_).substr(value_.size() - n);
      if (std::string_view(kClose).starts_with(tail) ||
          (tail[0] == '\n' && std::string_view(kClose).starts_with(tail.substr(1)))) {
        keep = n;
        break;
      }
    }
    if (value_.size() > keep) {
      std::string out;
      AppendJsonEscaped(std::string_view(value_).substr(0, value_.size() - keep), &out);
      sink.Arguments(out);
      value_.erase(0, value_.size() - keep);
    }
    return Step::kContinue;
  }

  const std::vector<ToolSpec>* tools_;
  const ToolSpec* tool_ = nullptr;
  State state_ = State::kMarker;
  LiteralMatcher marker_;
  std::vector<std::string_view> marker_options_ = {"<function="};
  std::string function_, parameter_, value_;
  bool began_ = false, first_parameter_ = true, as_string_ = false, at_value_start_ = false;
};

// Python-ish keyword arguments of a built-in tool call: k="v", n=3, flag=True.
bool ParseKeywordArguments(std::string_view text, nlohmann::ordered_json* out) {
  *out = nlohmann::ordered_json::object();
  size_t i = 0;
  auto skip_space = [&] {
    while (i < text.size() && absl::ascii_isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  skip_space();
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() &&
           (absl::ascii_isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) {
      ++i;
    }
    const std::string key(text.substr(start, i - start));
    skip_space();
    if (key.empty() || i >= text.size() || text[i] != '=') return false;
    ++i;
    skip_space();
    if (i >= text.size()) return false;
    if (text[i] == '"' || text[i] == '\'') {
      const char quote = text[i++];
      std::string value;
      while (i < text.size() && text[i] != quote) {
        if (text[i] == '\\' && i + 1 < text.size()) {
          const char e = text[++i];
          value.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e);
        } else {
          value.push_back(text[i]);
        }
        ++i;
      }
      if (i >= text.size()) return false;
      ++i;
      (*out)[key] = value;
    } else {
      start = i;
      while (i < text.size() && text[i] != ',') ++i;
      const std::string word(StripSpace(text.substr(start, i - start)));
      if (word == "True" || word == "False") {
        (*out)[key] = word == "True";
      } else if (word == "None") {
        (*out)[key] = nullptr;
      } else {
        nlohmann::ordered_json number = nlohmann::ordered_json::parse(word, nullptr, false);
        if (!number.is_number()) return false;
        (*out)[key] = number;
      }
    }
    skip_space();
    if (i < text.size()) {
      if (text[i] != ',') return false;
      ++i;
      skip_space();
    }
  }
  return true;
}

class PythonTagReader : public BlockReader {
 public:
  explicit PythonTagReader(const std::vector<ToolSpec>* tools) : tools_(tools) {}

  Step Push(char c, CallSink& sink) override {
    if (json_) return json_->Push(c, sink);
    if (code_.empty() && IsJsonSpace(c)) return Step::kContinue;
    if (code_.empty() && c == '{') {
      json_ = MakeJsonCallReader(JsonCallShape{}, false);
      return json_->Push(c, sink);
    }
    code_.push_back(c);
    return Step::kContinue;
  }

  bool Finish(CallSink& sink) override {
    if (json_) return json_->Finish(sink);
    const std::string_view code = StripSpace(code_);
    // tool.call(k="v", ...)
    const size_t dot = code.find(".call(");
    if (dot != std::string_view::npos && std::string_view(code).ends_with(")") &&
        FindTool(tools_, code.substr(0, dot)) != nullptr) {
      nlohmann::ordered_json args;
      const size_t from = dot + 6;
      if (ParseKeywordArguments(code.substr(from, code.size() - 1 - from), &args)) {
        return Call(std::string(code.substr(0, dot)), args.dump(), sink);
      }
    }
    for (std::string_view name : {"python", "ipython", "code_interpreter"}) {
      if (FindTool(tools_, name) != nullptr) {
        return Call(std::string(name), nlohmann::ordered_json{{"code", code}}.dump(), sink);
      }
    }
    return false;
  }

 private:
  bool Call(const std::string& name, const std::string& args, CallSink& sink) {
    if (!sink.BeginCall(name, "")) return false;
    sink.Arguments(args);
    sink.EndCall(true);
    return true;
  }

  const std::vector<ToolSpec>* tools_;
  std::unique_ptr<BlockReader> json_;
  std::string code_;
};

}  // namespace

std::unique_ptr<BlockReader> MakeJsonCallReader(JsonCallShape shape, bool allow_list) {
  return std::make_unique<JsonCallReader>(std::move(shape), allow_list);
}

std::unique_ptr<BlockReader> MakeGenericJsonReader() {
  return std::make_unique<GenericJsonReader>();
}

std::unique_ptr<BlockReader> MakeQwenXmlReader(const std::vector<ToolSpec>* tools) {
  return std::make_unique<QwenXmlReader>(tools);
}

std::unique_ptr<BlockReader> MakeMistralArgsReader() {
  return std::make_unique<MistralArgsReader>();
}

std::unique_ptr<BlockReader> MakePythonTagReader(const std::vector<ToolSpec>* tools) {
  return std::make_unique<PythonTagReader>(tools);
}

}  // namespace textgen
