#include "engine/chat/assistant_output_parser.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace textgen {
namespace {

using Type = AssistantOutputEvent::Type;

bool IsSpaceOnly(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return IsJsonSpace(c); });
}

// The length of the longest proper suffix of `text` that begins one of `markers`.
size_t HeldPrefixLength(std::string_view text, const std::vector<std::string_view>& markers) {
  size_t held = 0;
  for (std::string_view m : markers) {
    for (size_t n = std::min(text.size(), m.size() - 1); n > held; --n) {
      if (std::string_view(m).starts_with(text.substr(text.size() - n))) {
        held = n;
        break;
      }
    }
  }
  return held;
}

bool IsMistral(ToolCallFormat f) {
  return f == ToolCallFormat::kMistralV3 || f == ToolCallFormat::kMistralArgs;
}

}  // namespace

AssistantOutputParser::AssistantOutputParser(AssistantOutputOptions options)
    : options_(std::move(options)) {
  rng_.seed(options_.id_seed.has_value() ? *options_.id_seed : std::random_device{}());
  tools_active_ = !options_.tools.empty() && options_.tool_choice.mode != ToolChoiceMode::kNone &&
                  options_.format != ToolCallFormat::kUnsupported;
  think_open_ = ReasoningOpenTag(options_.reasoning);
  think_close_ = ReasoningCloseTag(options_.reasoning);
  if (tools_active_) {
    switch (options_.format) {
      case ToolCallFormat::kHermes:
        markers_ = {"<tool_call>"};
        close_marker_ = "</tool_call>";
        break;
      case ToolCallFormat::kQwen3CoderXml:
        markers_ = {"<tool_call>"};
        break;
      case ToolCallFormat::kLlama3Json:
        markers_ = {"<|python_tag|>"};
        json_at_start_ = true;
        break;
      case ToolCallFormat::kMistralV3:
      case ToolCallFormat::kMistralArgs:
        markers_ = {"[TOOL_CALLS]"};
        break;
      case ToolCallFormat::kPhi4Mini:
        markers_ = {"<|tool_call|>"};
        close_marker_ = "<|/tool_call|>";
        break;
      case ToolCallFormat::kNemotronV2:
        markers_ = {"<TOOLCALL>"};
        close_marker_ = "</TOOLCALL>";
        break;
      case ToolCallFormat::kGenericJson:
        json_at_start_ = true;
        break;
      case ToolCallFormat::kUnsupported:
        break;
    }
  }
  if (options_.reasoning != ReasoningSyntax::kNone && options_.starts_in_reasoning) {
    state_ = State::kReasoning;
  }
}

AssistantOutputParser::~AssistantOutputParser() = default;

void AssistantOutputParser::Feed(std::string_view delta,
                                 std::vector<AssistantOutputEvent>* events) {
  out_ = events;
  buf_.append(delta);
  Run();
  out_ = nullptr;
}

void AssistantOutputParser::Finish(std::vector<AssistantOutputEvent>* events) {
  out_ = events;
  eof_ = true;
  Run();
  if (state_ == State::kBlock) {
    // The answer ended inside a block: the reader ends the call it began (or reports the one
    // it could only decide now); what is not part of a call is content.
    reader_->Finish(*this);
    reader_.reset();
    if (!IsSpaceOnly(raw_) || !block_committed_) EmitContent(raw_);
    raw_.clear();
    state_ = State::kContent;
  }
  if (!content_ws_.empty()) Emit(Type::kContent, content_ws_);
  content_ws_.clear();
  out_ = nullptr;
}

AssistantMessage AssistantOutputParser::ParseWhole(AssistantOutputOptions options,
                                                   std::string_view answer) {
  AssistantOutputParser parser(std::move(options));
  std::vector<AssistantOutputEvent> events;
  parser.Feed(answer, &events);
  parser.Finish(&events);
  AssistantMessage message;
  message.Apply(events);
  return message;
}

void AssistantOutputParser::Run() {
  while (true) {
    bool progressed = false;
    switch (state_) {
      case State::kAnswerStart:
        progressed = StepAnswerStart();
        break;
      case State::kReasoning:
        progressed = StepReasoning();
        break;
      case State::kContent:
        progressed = StepContent();
        break;
      case State::kBlock:
        progressed = StepBlock();
        break;
      case State::kAfterCall:
        progressed = StepAfterCall();
        break;
    }
    if (!progressed) return;
  }
}

// Whether the answer opens a reasoning block (after whitespace).
bool AssistantOutputParser::StepAnswerStart() {
  if (think_open_.empty()) {
    state_ = State::kContent;
    return true;
  }
  size_t i = 0;
  while (i < buf_.size() && IsJsonSpace(buf_[i])) ++i;
  const std::string_view rest = std::string_view(buf_).substr(i);
  if (std::string_view(rest).starts_with(think_open_)) {
    buf_.erase(0, i + think_open_.size());
    state_ = State::kReasoning;
    return true;
  }
  if (!eof_ && std::string_view(think_open_).starts_with(rest)) return false;  // undecided yet
  state_ = State::kContent;
  return true;
}

bool AssistantOutputParser::StepReasoning() {
  if (buf_.empty()) return false;
  const size_t close = buf_.find(think_close_);
  if (close != std::string::npos) {
    EmitReasoning(std::string_view(buf_).substr(0, close));
    reasoning_ws_.clear();  // trailing whitespace of the reasoning
    buf_.erase(0, close + think_close_.size());
    skip_ws_ = true;
    state_ = State::kContent;
    return true;
  }
  const size_t held = eof_ ? 0 : HeldPrefixLength(buf_, {think_close_});
  EmitReasoning(std::string_view(buf_).substr(0, buf_.size() - held));
  buf_.erase(0, buf_.size() - held);
  return false;
}

bool AssistantOutputParser::StepContent() {
  if (skip_ws_) {
    size_t i = 0;
    while (i < buf_.size() && IsJsonSpace(buf_[i])) ++i;
    buf_.erase(0, i);
    if (buf_.empty()) return false;
    skip_ws_ = false;
  }
  if (buf_.empty()) return false;
  if (json_at_start_ && !content_started_) {
    size_t i = 0;
    while (i < buf_.size() && IsJsonSpace(buf_[i])) ++i;
    content_ws_.append(buf_, 0, i);
    buf_.erase(0, i);
    if (buf_.empty()) return false;
    if (buf_[0] == '{') {
      StartBlock("", options_.format == ToolCallFormat::kGenericJson
                         ? MakeGenericJsonReader()
                         : MakeJsonCallReader(JsonCallShape{}, false));
      return true;
    }
  }
  size_t first = std::string::npos;
  std::string_view marker;
  for (std::string_view m : markers_) {
    const size_t at = buf_.find(m);
    if (at < first) {
      first = at;
      marker = m;
    }
  }
  if (first != std::string::npos) {
    EmitContent(std::string_view(buf_).substr(0, first));
    buf_.erase(0, first + marker.size());
    StartBlock(marker, ReaderForMarker(marker));
    return true;
  }
  const size_t held = eof_ ? 0 : HeldPrefixLength(buf_, markers_);
  EmitContent(std::string_view(buf_).substr(0, buf_.size() - held));
  buf_.erase(0, buf_.size() - held);
  return false;
}

std::unique_ptr<BlockReader> AssistantOutputParser::ReaderForMarker(std::string_view) const {
  switch (options_.format) {
    case ToolCallFormat::kQwen3CoderXml:
      return MakeQwenXmlReader(&options_.tools);
    case ToolCallFormat::kLlama3Json:
      return MakePythonTagReader(&options_.tools);
    case ToolCallFormat::kMistralArgs:
      return MakeMistralArgsReader();
    case ToolCallFormat::kMistralV3: {
      JsonCallShape shape;
      shape.argument_keys = {"arguments"};
      shape.wait_for_close = true;
      return MakeJsonCallReader(std::move(shape), true);
    }
    default:
      return MakeJsonCallReader(JsonCallShape{{"arguments"}, false}, true);
  }
}

void AssistantOutputParser::StartBlock(std::string_view marker,
                                       std::unique_ptr<BlockReader> reader) {
  raw_ = content_ws_;
  raw_.append(marker);
  content_ws_.clear();
  reader_ = std::move(reader);
  block_committed_ = false;
  state_ = State::kBlock;
}

bool AssistantOutputParser::StepBlock() {
  size_t i = 0;
  bool ended = false;
  while (i < buf_.size() && !ended) {
    const char c = buf_[i];
    raw_.push_back(c);
    const size_t raw_size = raw_.size();
    const BlockReader::Step step = reader_->Push(c, *this);
    switch (step) {
      case BlockReader::Step::kContinue:
        ++i;
        break;
      case BlockReader::Step::kEnd:
        ++i;
        ended = true;
        EndBlock(false);
        break;
      case BlockReader::Step::kEndBefore:
        if (raw_.size() == raw_size) raw_.pop_back();
        ended = true;
        EndBlock(false);
        break;
      case BlockReader::Step::kError:
        if (raw_.size() == raw_size) raw_.pop_back();  // the byte was not consumed
        ended = true;
        EndBlock(true);
        break;
    }
  }
  buf_.erase(0, i);
  return ended;
}

void AssistantOutputParser::EndBlock(bool failed) {
  reader_.reset();
  const bool committed = block_committed_;
  std::string raw = std::move(raw_);
  raw_.clear();
  if (failed) {
    // Text that did not become part of a call is content, verbatim.
    if (!committed || !IsSpaceOnly(raw)) EmitContent(raw);
    state_ = committed ? State::kAfterCall : State::kContent;
    return;
  }
  state_ = State::kAfterCall;
}

// After a block: whitespace (and ';' between Llama's calls) is dropped, and the block's
// closing marker swallowed when it follows.
bool AssistantOutputParser::StepAfterCall() {
  size_t i = 0;
  while (i < buf_.size() &&
         (IsJsonSpace(buf_[i]) || (json_at_start_ && buf_[i] == ';' && !content_started_))) {
    ++i;
  }
  buf_.erase(0, i);
  if (buf_.empty() && !eof_) return false;
  if (!close_marker_.empty()) {
    if (std::string_view(buf_).starts_with(close_marker_)) {
      buf_.erase(0, close_marker_.size());
      return true;  // look again: whitespace may follow
    }
    if (std::string_view(close_marker_).starts_with(buf_)) {
      if (!eof_) return false;
      buf_.clear();  // a truncated closing marker is still markup
    }
  }
  skip_ws_ = true;
  state_ = State::kContent;
  return true;
}

void AssistantOutputParser::EmitContent(std::string_view text) {
  if (text.empty()) return;
  if (!tools_active_) {
    Emit(Type::kContent, text);
    content_started_ = true;
    return;
  }
  // Hold trailing whitespace: it is dropped if a call's markup follows.
  size_t end = text.size();
  while (end > 0 && IsJsonSpace(text[end - 1])) --end;
  if (end > 0) {
    std::string piece = std::move(content_ws_);
    content_ws_.clear();
    piece.append(text.substr(0, end));
    Emit(Type::kContent, piece);
    content_started_ = true;
  }
  content_ws_.append(text.substr(end));
}

void AssistantOutputParser::EmitReasoning(std::string_view text) {
  if (!reasoning_started_) {
    size_t start = 0;
    while (start < text.size() && IsJsonSpace(text[start])) ++start;
    text.remove_prefix(start);
  }
  size_t end = text.size();
  while (end > 0 && IsJsonSpace(text[end - 1])) --end;
  if (end > 0) {
    std::string piece = std::move(reasoning_ws_);
    reasoning_ws_.clear();
    piece.append(text.substr(0, end));
    Emit(Type::kReasoning, piece);
    reasoning_started_ = true;
  }
  reasoning_ws_.append(text.substr(end));
}

void AssistantOutputParser::Emit(Type type, std::string_view text, int index) {
  if (out_ == nullptr) return;
  const bool mergeable =
      type == Type::kContent || type == Type::kReasoning || type == Type::kToolCallArguments;
  if (mergeable && text.empty()) return;
  if (mergeable && !out_->empty() && out_->back().type == type &&
      out_->back().tool_index == index) {
    out_->back().text.append(text);
    return;
  }
  AssistantOutputEvent e;
  e.type = type;
  e.text = std::string(text);
  e.tool_index = index;
  out_->push_back(std::move(e));
}

std::string AssistantOutputParser::NewId() {
  static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::uniform_int_distribution<int> pick(0, 61);
  const bool mistral = IsMistral(options_.format);
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id.push_back(kAlnum[pick(rng_)]);
  return id;
}

bool AssistantOutputParser::BeginCall(const std::string& name, const std::string& id) {
  const ToolChoice& choice = options_.tool_choice;
  if (choice.mode == ToolChoiceMode::kNamed) {
    if (name != choice.function_name) return false;
  } else if (std::none_of(options_.tools.begin(), options_.tools.end(),
                          [&](const ToolSpec& t) { return t.name == name; })) {
    return false;
  }
  AssistantOutputEvent e;
  e.type = Type::kToolCallBegin;
  e.tool_index = next_index_++;
  // Mistral's templates refuse ids other than 9 alphanumerics in the next turn's history.
  const bool usable =
      !id.empty() && (!IsMistral(options_.format) ||
                      (id.size() == 9 && std::all_of(id.begin(), id.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c));
                       })));
  e.id = usable ? id : NewId();
  e.name = name;
  if (out_ != nullptr) out_->push_back(std::move(e));
  raw_.clear();
  block_committed_ = true;
  return true;
}

void AssistantOutputParser::Arguments(std::string_view fragment) {
  Emit(Type::kToolCallArguments, fragment, next_index_ - 1);
  raw_.clear();
}

void AssistantOutputParser::EndCall(bool complete) {
  AssistantOutputEvent e;
  e.type = Type::kToolCallEnd;
  e.tool_index = next_index_ - 1;
  e.complete = complete;
  if (out_ != nullptr) out_->push_back(std::move(e));
  raw_.clear();
}

void AssistantOutputParser::Content(std::string_view text) {
  Emit(Type::kContent, text);
  content_started_ = true;
  raw_.clear();
  block_committed_ = true;
}

}  // namespace textgen
