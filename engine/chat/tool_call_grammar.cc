#include "engine/chat/tool_call_grammar.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "engine/chat/tool_call_readers.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

// A GBNF string literal of `s` (UTF-8 kept; quotes, backslashes and control bytes escaped).
std::string Lit(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\x%02x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  return out + "\"";
}

// A character class of every code point but these ASCII bytes.
std::string NotClass(std::string_view bytes) {
  std::string out = "[^";
  for (char c : bytes) out += absl::StrFormat("\\x%02x", static_cast<unsigned char>(c));
  return out + "]";
}

std::string_view OpenMarker(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3CoderXml:
      return "<tool_call>";
    case ToolCallFormat::kMistralV3:
    case ToolCallFormat::kMistralArgs:
      return "[TOOL_CALLS]";
    case ToolCallFormat::kPhi4Mini:
      return "<|tool_call|>";
    case ToolCallFormat::kNemotronV2:
      return "<TOOLCALL>";
    default:
      return "";
  }
}

std::string_view CloseMarker(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3CoderXml:
      return "</tool_call>";
    case ToolCallFormat::kPhi4Mini:
      return "<|/tool_call|>";
    case ToolCallFormat::kNemotronV2:
      return "</TOOLCALL>";
    default:
      return "";
  }
}

// Writes one grammar: shared rules, one rule set per tool, the format's calls.
class Writer {
 public:
  Writer(ToolCallFormat format, const ToolCallGrammarOptions& options)
      : format_(format), options_(options) {}

  void Rule(const std::string& name, const std::string& body) {
    text_ += name + " ::= " + body + "\n";
  }

  // Markup as its control token when it is one, else as text.
  std::string Marker(std::string_view text) const {
    const auto it = options_.marker_tokens.find(std::string(text));
    if (it != options_.marker_tokens.end()) return absl::StrFormat("<[%d]>", it->second);
    return Lit(text);
  }

  // Rule `name`: any text without `s` in it. `s` is ASCII and its first byte does not recur
  // in it, so a failed partial match restarts only at that byte (the KMP automaton of such a
  // string): r<k> leaves state k back to state 0; f<k> ends the text in state k.
  void NotContaining(const std::string& name, std::string_view s) {
    const size_t n = s.size();
    const std::string c0 = Lit(s.substr(0, 1));
    if (n == 1) {
      Rule(name, NotClass(s) + "*");
      return;
    }
    for (size_t k = 1; k < n; ++k) {
      const std::string next =
          k + 1 < n ? " | " + Lit(s.substr(k, 1)) + " " + name + "-r" + std::to_string(k + 1) : "";
      Rule(name + "-r" + std::to_string(k),
           NotClass(std::string{s[k], s[0]}) + next + " | " + c0 + " " + name + "-r1");
      const std::string fnext =
          k + 1 < n ? " | " + Lit(s.substr(k, 1)) + " " + name + "-f" + std::to_string(k + 1) : "";
      Rule(name + "-f" + std::to_string(k), "\"\"" + fnext + " | " + c0 + " " + name + "-f1");
    }
    Rule(name, "( " + NotClass(s.substr(0, 1)) + " | " + c0 + " " + name + "-r1 )* ( " + c0 + " " +
                   name + "-f1 )?");
  }

  // What may come before the calls: a reasoning block (already open, or optional).
  std::string ReasoningPrefix() {
    if (options_.reasoning == ReasoningSyntax::kNone) return "";
    const std::string_view open = ReasoningOpenTag(options_.reasoning);
    const std::string_view close = ReasoningCloseTag(options_.reasoning);
    NotContaining("tc-think", close);
    const std::string block = "tc-think " + Marker(close) + " tc-sp ";
    if (options_.starts_in_reasoning) return block;
    return "( " + Marker(open) + " " + block + ")? ";
  }

  absl::Status AddTools(const std::vector<ToolSpec>& tools, const std::vector<int>& indices) {
    Rule("tc-sp", "( \" \" | \"\\n\"{1,2} [ \\t]{0,20} )?");
    std::string alternatives;
    for (int i : indices) {
      const ToolSpec& tool = tools[i];
      const std::string prefix = "tc-t" + std::to_string(i);
      const std::string path = absl::StrFormat("tools[%d].function.parameters", i);
      auto args = JsonSchemaToGbnfRules(tool.parameters, prefix + "-args", options_.schema);
      if (!args.ok()) {
        return absl::InvalidArgumentError(path + ": " + std::string(args.status().message()));
      }
      if (format_ == ToolCallFormat::kQwen3CoderXml) {
        TG_ASSIGN_OR_RETURN(const std::string call, XmlCall(tool, prefix, path));
        Rule(prefix, call);
      } else {
        text_ += *args;
        Rule(prefix, CallBody(tool.name, prefix + "-args"));
      }
      alternatives += (alternatives.empty() ? "" : " | ") + prefix;
    }
    Rule("tc-call", alternatives);
    return absl::OkStatus();
  }

  // The calls of a "required" (or named) answer, or of a lazy grammar from its trigger on.
  std::string Calls(bool several) {
    // More calls after the first: `separator` then another `call`, when several are allowed.
    auto more = [several](const std::string& separator, const std::string& call) {
      return several ? " ( " + separator + call + " )*" : std::string();
    };
    switch (format_) {
      case ToolCallFormat::kHermes:
        Rule("tc-block", Marker("<tool_call>") + " tc-sp tc-call tc-sp " + Marker("</tool_call>"));
        return "tc-block" + more("tc-sp ", "tc-block");
      case ToolCallFormat::kQwen3CoderXml:
        Rule("tc-block",
             Marker("<tool_call>") + " \"\\n\" tc-call \"\\n\" " + Marker("</tool_call>"));
        return "tc-block" + more("tc-sp ", "tc-block");
      case ToolCallFormat::kLlama3Json:
        return "tc-call";
      case ToolCallFormat::kMistralArgs:
        return "tc-call" + more("", "tc-call");
      case ToolCallFormat::kMistralV3:
      case ToolCallFormat::kPhi4Mini:
      case ToolCallFormat::kNemotronV2: {
        const std::string list =
            "\"[\" tc-sp tc-call" + more("tc-sp \",\" tc-sp ", "tc-call") + " tc-sp \"]\"";
        const std::string_view close = CloseMarker(format_);
        return Marker(OpenMarker(format_)) + " tc-sp " + list +
               (close.empty() ? "" : " tc-sp " + Marker(close));
      }
      case ToolCallFormat::kGenericJson:
        if (several) {
          return "\"{\" tc-sp \"\\\"tool_calls\\\"\" tc-sp \":\" tc-sp \"[\" tc-sp tc-call ( tc-sp "
                 "\",\" tc-sp tc-call )* tc-sp \"]\" tc-sp \"}\"";
        }
        // One call, in either shape.
        return "\"{\" tc-sp ( \"\\\"tool_call\\\"\" tc-sp \":\" tc-sp tc-call | "
               "\"\\\"tool_calls\\\"\" tc-sp \":\" tc-sp \"[\" tc-sp tc-call tc-sp \"]\" ) tc-sp "
               "\"}\"";
      case ToolCallFormat::kUnsupported:
        break;
    }
    return "";
  }

  // {"response": "..."}: kGenericJson's answer without calls.
  std::string Response() {
    Rule("tc-str-char",
         "[^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] "
         "[0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )");
    return "\"{\" tc-sp \"\\\"response\\\"\" tc-sp \":\" tc-sp \"\\\"\" tc-str-char* \"\\\"\" "
           "tc-sp \"}\"";
  }

  std::string& text() { return text_; }

 private:
  // A JSON call object (name first), or Mistral's name[ARGS]{...}.
  std::string CallBody(const std::string& name, const std::string& args) {
    const std::string quoted = Lit("\"" + name + "\"");
    switch (format_) {
      case ToolCallFormat::kMistralArgs:
        return Marker("[TOOL_CALLS]") + " " + Lit(name) + " ( " + Marker("[CALL_ID]") +
               " [a-zA-Z0-9]{9} )? " + Marker("[ARGS]") + " " + args;
      default: {
        const std::string key = format_ == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
        std::string body = "\"{\" tc-sp \"\\\"name\\\"\" tc-sp \":\" tc-sp " + quoted +
                           " tc-sp \",\" tc-sp " + Lit("\"" + key + "\"") + " tc-sp \":\" tc-sp " +
                           args;
        if (format_ == ToolCallFormat::kMistralV3) {
          body +=
              " tc-sp \",\" tc-sp \"\\\"id\\\"\" tc-sp \":\" tc-sp \"\\\"\" [a-zA-Z0-9]{9} "
              "\"\\\"\"";
        }
        return body + " tc-sp \"}\"";
      }
    }
  }

  // Qwen3-Coder: <function=f>\n then each declared parameter as <parameter=p>\nvalue\n
  // </parameter>\n, then </function>.
  absl::StatusOr<std::string> XmlCall(const ToolSpec& tool, const std::string& prefix,
                                      const std::string& path) {
    std::string body = Lit("<function=" + tool.name + ">\n");
    const nlohmann::ordered_json& schema = tool.parameters;
    const auto props = schema.find("properties");
    if (props != schema.end() && props->is_object()) {
      std::vector<std::string> required;
      if (const auto r = schema.find("required"); r != schema.end() && r->is_array()) {
        for (const auto& name : *r) {
          if (name.is_string()) required.push_back(name.get<std::string>());
        }
      }
      int j = 0;
      for (const auto& [name, prop] : props->items()) {
        if (name.empty() || name.find_first_of(">\n") != std::string::npos) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s.properties: \"%s\" cannot be a Qwen3-Coder XML parameter name", path, name));
        }
        const std::string rule = prefix + "-p" + std::to_string(j++);
        std::string value;
        if (XmlParameterIsText(&tool, name)) {
          if (!have_xml_text_) NotContaining("tc-xml-text", "</parameter>");
          have_xml_text_ = true;
          value = "tc-xml-text";
        } else {
          auto rules = JsonSchemaToGbnfRules(prop, rule + "-json", options_.schema);
          if (!rules.ok()) {
            return absl::InvalidArgumentError(path + ".properties." + name + ": " +
                                              std::string(rules.status().message()));
          }
          text_ += *rules;
          value = rule + "-json";
        }
        Rule(rule, Lit("<parameter=" + name + ">\n") + " " + value + " " + Lit("\n</parameter>\n"));
        const bool is_required =
            std::find(required.begin(), required.end(), name) != required.end();
        body += " " + rule + (is_required ? "" : "?");
      }
    }
    return body + " " + Lit("</function>");
  }

  ToolCallFormat format_;
  const ToolCallGrammarOptions& options_;
  std::string text_;
  bool have_xml_text_ = false;
};

// Validates the inputs and writes the tool rules of the tools `choice` allows.
absl::StatusOr<std::vector<ToolSpec>> Prepare(ToolCallFormat format,
                                              const nlohmann::ordered_json& tools,
                                              const ToolChoice& choice, Writer& writer) {
  if (format == ToolCallFormat::kUnsupported) {
    return absl::InvalidArgumentError(
        "tools: this model's chat template uses a tool-call syntax textgen does not parse");
  }
  TG_ASSIGN_OR_RETURN(std::vector<ToolSpec> specs, ParseTools(tools));
  if (specs.empty()) return absl::InvalidArgumentError("tools: must not be empty");
  std::vector<int> indices;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (choice.mode != ToolChoiceMode::kNamed || specs[i].name == choice.function_name) {
      indices.push_back(static_cast<int>(i));
    }
  }
  if (indices.empty()) {
    return absl::InvalidArgumentError("tool_choice.function.name: \"" + choice.function_name +
                                      "\" is not one of the tools");
  }
  TG_RETURN_IF_ERROR(writer.AddTools(specs, indices));
  return specs;
}

}  // namespace

std::vector<std::string> ToolCallMarkers(ToolCallFormat format, ReasoningSyntax reasoning) {
  std::vector<std::string> markers;
  if (!OpenMarker(format).empty()) markers.emplace_back(OpenMarker(format));
  if (!CloseMarker(format).empty()) markers.emplace_back(CloseMarker(format));
  if (format == ToolCallFormat::kMistralArgs) {
    markers.emplace_back("[CALL_ID]");
    markers.emplace_back("[ARGS]");
  }
  if (reasoning != ReasoningSyntax::kNone) {
    markers.emplace_back(ReasoningOpenTag(reasoning));
    markers.emplace_back(ReasoningCloseTag(reasoning));
  }
  return markers;
}

absl::StatusOr<std::string> ToolCallGrammar(ToolCallFormat format, const nlohmann::json& tools,
                                            const ToolChoice& choice,
                                            const ToolCallGrammarOptions& options) {
  return ToolCallGrammar(format, nlohmann::ordered_json(tools), choice, options);
}

absl::StatusOr<std::string> ToolCallGrammar(ToolCallFormat format,
                                            const nlohmann::ordered_json& tools,
                                            const ToolChoice& choice,
                                            const ToolCallGrammarOptions& options) {
  if (choice.mode != ToolChoiceMode::kRequired && choice.mode != ToolChoiceMode::kNamed) {
    return absl::InvalidArgumentError(
        "tool_choice: a forced-call grammar needs \"required\" or a named function");
  }
  Writer w(format, options);
  TG_RETURN_IF_ERROR(Prepare(format, tools, choice, w).status());
  // One call for a named function and for Llama 3.x (its template renders one per turn).
  const bool several = options.parallel_tool_calls && choice.mode == ToolChoiceMode::kRequired &&
                       format != ToolCallFormat::kLlama3Json;
  // Leading whitespace is allowed (some templates render it before calls).
  const std::string prefix = "tc-sp " + w.ReasoningPrefix();
  w.Rule("root", prefix + w.Calls(several));
  return std::move(w.text());
}

absl::StatusOr<std::string> ToolCallGrammar(ToolCallFormat format, const nlohmann::json& tools,
                                            const ToolChoice& choice, bool parallel_tool_calls) {
  ToolCallGrammarOptions options;
  options.parallel_tool_calls = parallel_tool_calls;
  return ToolCallGrammar(format, tools, choice, options);
}

absl::StatusOr<AutoToolCallGrammar> AutoToolCallGrammarFor(ToolCallFormat format,
                                                           const nlohmann::json& tools,
                                                           const ToolCallGrammarOptions& options) {
  return AutoToolCallGrammarFor(format, nlohmann::ordered_json(tools), options);
}

absl::StatusOr<AutoToolCallGrammar> AutoToolCallGrammarFor(ToolCallFormat format,
                                                           const nlohmann::ordered_json& tools,
                                                           const ToolCallGrammarOptions& options) {
  Writer w(format, options);
  TG_RETURN_IF_ERROR(Prepare(format, tools, ToolChoice{}, w).status());
  const bool several = options.parallel_tool_calls && format != ToolCallFormat::kLlama3Json;
  AutoToolCallGrammar out;
  if (format == ToolCallFormat::kGenericJson) {
    const std::string prefix = "tc-sp " + w.ReasoningPrefix();
    const std::string calls = w.Calls(several);
    w.Rule("root", prefix + "( " + calls + " | " + w.Response() + " )");
    out.lazy = false;
    out.gbnf = std::move(w.text());
    return out;
  }
  w.Rule("root", w.Calls(several));
  out.gbnf = std::move(w.text());
  GrammarTrigger trigger;
  if (format == ToolCallFormat::kLlama3Json) {
    trigger.type = GrammarTrigger::Type::kAtStart;
    trigger.text = "{";
  } else {
    trigger.text = std::string(OpenMarker(format));
    const auto it = options.marker_tokens.find(trigger.text);
    if (it != options.marker_tokens.end()) {
      trigger.type = GrammarTrigger::Type::kToken;
      trigger.token = it->second;
    } else {
      trigger.type = GrammarTrigger::Type::kWord;
    }
  }
  out.triggers.push_back(std::move(trigger));
  return out;
}

std::string GenericToolSystemPrompt(const std::vector<ToolSpec>& tools, bool parallel_tool_calls) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ToolSpec& t : tools) {
    nlohmann::ordered_json f = {{"name", t.name}};
    if (!t.description.empty()) f["description"] = t.description;
    f["parameters"] = t.parameters;
    list.push_back(std::move(f));
  }
  std::string out = "You can call these tools (JSON Schema of each one's arguments):\n" +
                    list.dump(2) +
                    "\n\nAnswer with one JSON object and nothing else. To call tools:\n";
  if (parallel_tool_calls) {
    out += "{\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<arguments>}}, ...]}";
  } else {
    out += "{\"tool_call\": {\"name\": \"<tool name>\", \"arguments\": {<arguments>}}}";
  }
  out += "\nTo answer without tools:\n{\"response\": \"<your answer>\"}";
  return out;
}

}  // namespace textgen
