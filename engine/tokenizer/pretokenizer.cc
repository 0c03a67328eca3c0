#include "engine/tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace textgen {
namespace {

// llama.cpp's regexes (src/llama-vocab.cpp, llm_tokenizer_bpe), data copied as written there.
// Its "(?:'[sS]|'[tT]|...)" spellings are its stand-ins for "(?i:'s|'t|...)", kept so the
// table reads like the source.
constexpr const char* kGpt2[] = {
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
};
constexpr const char* kLlama3[] = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};
constexpr const char* kQwen2[] = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};
// Six characters of the letter class are written as \x{...}: they have singleton canonical
// decompositions (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126, U+212A), which any NFC-normalizing
// editor or copy would silently turn into other code points.
constexpr const char* kDeepseekLlm[] = {
    R"([\r\n])",
    R"(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\x{1F7D}ᾀ-ᾴᾶ-ᾼ\x{1FBE}ῂ-ῄῆ-ῌῐ-\x{1FD3}ῖ-\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\x{2126}ℨ\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)",
    R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)",
    R"(\s+$)",
    R"([一-龥ࠀ-一가-퟿]+)",
    R"(\p{N}+)",
};
constexpr const char* kDeepseekCoder[] = {
    R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", R"([一-龥ࠀ-一가-퟿]+)", R"(\p{N})",
};
constexpr const char* kFalcon[] = {
    R"([\p{P}\$\+<=>\^~\|`]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"([0-9][0-9][0-9])",
};
constexpr const char* kStarcoder[] = {
    R"(\p{N})",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
};
// llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT (a BPE vocab whose pre is "default" or missing).
constexpr const char* kDefault[] = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"(\p{N}+)",
    R"([0-9][0-9][0-9])",
};

struct Entry {
  std::vector<std::string_view> names;
  std::vector<std::string_view> regexes;
  PreTokenizerTraits traits;
};

template <size_t N>
std::vector<std::string_view> List(const char* const (&a)[N]) {
  return std::vector<std::string_view>(a, a + N);
}

// The one table: pre-tokenizer name -> regex list (+ traits), names as llama.cpp accepts them.
const std::vector<Entry>& Table() {
  static const auto* table = new std::vector<Entry>{
      {{"default", ""}, List(kDefault), {}},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "mpt", "olmo", "jais",
        "exaone4", "gigachat"},
       List(kGpt2),
       {}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "dbrx", "smaug-bpe"},
       List(kLlama3),
       {/*ignore_merges=*/true}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}, List(kQwen2), {}},
      {{"deepseek-llm"}, List(kDeepseekLlm), {}},
      {{"deepseek-coder"}, List(kDeepseekCoder), {}},
      {{"falcon"}, List(kFalcon), {}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       List(kStarcoder),
       {}},
  };
  return *table;
}

const Entry* Find(std::string_view name) {
  for (const Entry& e : Table()) {
    for (std::string_view n : e.names) {
      if (n == name) return &e;
    }
  }
  return nullptr;
}

absl::Status UnknownName(std::string_view name) {
  return absl::UnimplementedError(
      absl::StrCat("unsupported pre-tokenizer '", std::string(name), "'"));
}

size_t Utf8Len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) return 2;
  if ((c >> 4) == 0xE) return 3;
  if ((c >> 3) == 0x1E) return 4;
  return 1;
}

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::~PreTokenizer() {
  for (Compiled* c : compiled_) delete c;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::ForName(std::string_view name) {
  const Entry* e = Find(name);
  if (e == nullptr) return UnknownName(name);
  return FromRegexes(std::vector<std::string>(e->regexes.begin(), e->regexes.end()));
}

absl::StatusOr<PreTokenizerTraits> PreTokenizer::TraitsForName(std::string_view name) {
  const Entry* e = Find(name);
  if (e == nullptr) return UnknownName(name);
  return e->traits;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromRegexes(
    std::vector<std::string> regexes) {
  std::unique_ptr<PreTokenizer> pre(new PreTokenizer());
  for (const std::string& re : regexes) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    // UCP: \s, \d, \w and POSIX classes follow Unicode properties, as in the Rust/Python
    // regex engines the patterns were written for; DOLLAR_ENDONLY: `$` is the piece's end
    // only (not before a final newline), as in llama.cpp's std::regex.
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(error, msg, sizeof(msg));
      return absl::InvalidArgumentError(absl::StrCat("pre-tokenizer regex '", re,
                                                     "' does not compile at offset ", offset, ": ",
                                                     reinterpret_cast<char*>(msg)));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional speed-up; matching works without
    auto* c = new Compiled();
    c->code = code;
    pre->compiled_.push_back(c);
  }
  pre->regexes_ = std::move(regexes);
  return pre;
}

std::vector<std::string_view> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const Compiled* c : compiled_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(c->code, nullptr);
    next.clear();
    for (std::string_view piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t start = 0;    // search position
      size_t emitted = 0;  // end of the last piece emitted
      while (start < piece.size()) {
        const int rc =
            pcre2_match(c->code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
        // No match, or a resource limit (kept whole rather than failing the request).
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t b = ov[0], e = ov[1];
        if (e == b) {  // an empty match splits nothing; step one character on
          start = b + Utf8Len(static_cast<unsigned char>(piece[b]));
          continue;
        }
        if (b > emitted) next.push_back(piece.substr(emitted, b - emitted));
        next.push_back(piece.substr(b, e - b));
        emitted = start = e;
      }
      if (emitted < piece.size()) next.push_back(piece.substr(emitted));
    }
    pcre2_match_data_free(md);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace textgen
