#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "engine/tokenizer/gpt2_byte_map.h"
#include "engine/tokenizer/unicode.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 '▁' stands for a space

absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Value of a "<0xXX>" byte token, or -1.
int ByteTokenValue(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = HexDigit(text[3]), lo = HexDigit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  for (size_t hit; (hit = text.find(from, pos)) != std::string_view::npos;) {
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

// Inverts the GPT-2 byte-level mapping; characters outside it are kept as UTF-8.
std::string Gpt2TokenBytes(std::string_view text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = DecodeUtf8(text, pos);
    const int b = c.status == Utf8Status::kOk ? Gpt2CodepointToByte(c.codepoint) : -1;
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(text.substr(pos, c.length));
    }
    pos += c.length;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(VocabData vocab) {
  TG_RETURN_IF_ERROR(ValidateVocab(vocab));
  std::unique_ptr<PreTokenizer> pre;
  if (vocab.model == VocabModel::kGpt2) {
    absl::StatusOr<std::unique_ptr<PreTokenizer>> p =
        vocab.pre_regexes.empty() ? PreTokenizer::ForName(vocab.pre.empty() ? "default" : vocab.pre)
                                  : PreTokenizer::FromRegexes(vocab.pre_regexes);
    if (!p.ok()) return p.status();
    pre = *std::move(p);
  }
  std::unique_ptr<Tokenizer> tok(new Tokenizer(std::move(vocab)));
  tok->pre_ = std::move(pre);
  tok->ApplyTextRules();
  tok->BuildTables();
  return tok;
}

bool Tokenizer::IsEog(int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& gguf) {
  TG_ASSIGN_OR_RETURN(VocabData vocab, VocabFromGguf(gguf));
  return Create(std::move(vocab));
}

void Tokenizer::BuildTables() {
  if (vocab_.model == VocabModel::kGpt2) {
    byte_level_.resize(256);
    for (int b = 0; b < 256; ++b) {
      AppendUtf8(Gpt2ByteToCodepoint(static_cast<uint8_t>(b)), &byte_level_[b]);
    }
  }
  const int32_t n = vocab_size();
  text_to_id_.reserve(n);
  // Later duplicates win, as in llama.cpp's token_to_id.
  for (int32_t i = 0; i < n; ++i) text_to_id_[vocab_.tokens[i]] = i;

  pieces_.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    const std::string& text = vocab_.tokens[i];
    switch (token_type(i)) {
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUnused:
        break;  // suppressed in rendered text
      case TokenType::kUserDefined:
        pieces_[i] = text;
        break;
      case TokenType::kByte:
        if (const int b = ByteTokenValue(text); b >= 0) {
          pieces_[i] = std::string(1, static_cast<char>(b));
          break;
        }
        [[fallthrough]];  // a malformed byte token renders like a normal one
      case TokenType::kNormal:
      case TokenType::kUndefined:
        pieces_[i] = vocab_.model == VocabModel::kLlama ? ReplaceAll(text, kSpmSpace, " ")
                                                        : Gpt2TokenBytes(text);
        break;
    }
  }

  for (int b = 0; b < 256; ++b) {
    int32_t id = -1;
    if (vocab_.model == VocabModel::kLlama) {
      // llama.cpp's byte_to_token: "<0xXX>", else the byte itself as a one-byte token.
      id = TokenToId(absl::StrFormat("<0x%02X>", b));
      if (id < 0) id = TokenToId(std::string(1, static_cast<char>(b)));
    } else {
      std::string ch;
      AppendUtf8(Gpt2ByteToCodepoint(static_cast<uint8_t>(b)), &ch);
      id = TokenToId(ch);
    }
    byte_tokens_[b] = id;
  }

  if (vocab_.model == VocabModel::kGpt2) {
    merges_.reserve(vocab_.merges.size());
    for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
      const std::string& m = vocab_.merges[rank];
      // Search from 1 so a merge whose left side is itself a space still splits correctly.
      const size_t sep = m.find(' ', 1);
      if (sep == std::string::npos) continue;
      const std::string_view left = std::string_view(m).substr(0, sep);
      const std::string_view right = std::string_view(m).substr(sep + 1);
      const int32_t l = TokenToId(left), r = TokenToId(right);
      const int32_t result = TokenToId(std::string(left) + std::string(right));
      // Merges whose parts or product are not tokens could never yield a token; skip them.
      if (l < 0 || r < 0 || result < 0) continue;
      const uint64_t key = (static_cast<uint64_t>(l) << 32) | static_cast<uint32_t>(r);
      merges_.try_emplace(key, Merge{static_cast<int32_t>(rank), result});  // first rank wins
    }
  }

  // Longest first so a special that contains another wins, as in llama.cpp.
  std::stable_sort(specials_.begin(), specials_.end(), [&](int32_t a, int32_t b) {
    return vocab_.tokens[a].size() > vocab_.tokens[b].size();
  });
}

std::string_view Tokenizer::TokenText(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return vocab_.tokens[id];
}

std::string_view Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return pieces_[id];
}

std::string Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out.append(TokenBytes(id));
  return out;
}

int32_t Tokenizer::TokenToId(std::string_view text) const {
  auto it = text_to_id_.find(AbslView(text));
  return it == text_to_id_.end() ? -1 : it->second;
}

TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return TokenType::kUndefined;
  return vocab_.types.empty() ? TokenType::kNormal : vocab_.types[id];
}

bool Tokenizer::IsTextToken(int32_t id) const {
  // llama.cpp would also merge pieces into control, byte or unused tokens when the text spells
  // them (e.g. "<0x41>" into the byte token); plain text must not turn into those, so only
  // tokens that stand for their own text are merge targets. With parse_special, spelled
  // control tokens are already matched whole by Partition, so ids still agree with llama.cpp.
  const TokenType t = token_type(id);
  return id >= 0 &&
         (t == TokenType::kNormal || t == TokenType::kUserDefined || t == TokenType::kUndefined);
}

float Tokenizer::Score(int32_t id) const {
  return vocab_.scores.empty() ? 0.0f : vocab_.scores[id];
}

std::vector<Tokenizer::Fragment> Tokenizer::Partition(std::string_view text,
                                                      bool parse_special) const {
  // llama.cpp trims with isspace in the C locale.
  const auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, text});
  std::vector<Fragment> next;
  for (int32_t id : specials_) {
    const TokenType t = token_type(id);
    if (!parse_special && (t == TokenType::kControl || t == TokenType::kUnknown)) continue;
    const std::string_view special = vocab_.tokens[id];
    const bool lstrip = !vocab_.lstrip.empty() && vocab_.lstrip[id];
    const bool rstrip = !vocab_.rstrip.empty() && vocab_.rstrip[id];
    next.clear();
    bool found = false;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t hit; (hit = rest.find(special)) != std::string_view::npos;) {
        std::string_view left = rest.substr(0, hit);
        while (lstrip && !left.empty() && is_space(left.back())) left.remove_suffix(1);
        if (!left.empty()) next.push_back({-1, left});
        next.push_back({id, {}});
        rest = rest.substr(hit + special.size());
        while (rstrip && !rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
        found = true;
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    if (found) frags.swap(next);
  }
  return frags;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);
  // llama.cpp prefixes a space to the first raw fragment and to any raw fragment that follows
  // a special token.
  bool after_special = true;
  for (const Fragment& f : Partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    if (vocab_.model == VocabModel::kLlama) {
      std::string escaped = vocab_.add_space_prefix && after_special ? std::string(kSpmSpace) : "";
      escaped += ReplaceAll(f.text, " ", kSpmSpace);
      EncodeSpm(escaped, &out);
    } else {
      EncodeBpe(f.text, &out);
    }
    after_special = false;
  }
  return out;
}

// SentencePiece-style merging as llama.cpp's llm_tokenizer_spm: start from single characters
// and repeatedly merge the adjacent pair whose concatenation is the highest-scoring token
// (leftmost on ties), using a priority queue with lazy invalidation.
void Tokenizer::EncodeSpm(std::string_view text, std::vector<int32_t>* out) const {
  struct Symbol {
    int64_t prev;
    int64_t next;
    size_t begin;
    size_t len;  // 0 once merged into the left neighbour
  };
  struct Bigram {
    float score;
    int64_t left;
    int64_t right;
    size_t len;  // combined length when queued; stale if either side changed since
  };
  struct Worse {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };

  std::vector<Symbol> syms;
  syms.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    // An ill-formed byte sequence becomes its own symbol and later falls back to bytes.
    const size_t len = DecodeUtf8(text, pos).length;
    const int64_t index = static_cast<int64_t>(syms.size());
    syms.push_back({index - 1, pos + len < text.size() ? index + 1 : -1, pos, len});
    pos += len;
  }
  if (syms.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, Worse> queue;
  const auto try_add = [&](int64_t left, int64_t right) {
    if (left < 0 || right < 0) return;
    const size_t len = syms[left].len + syms[right].len;
    const int32_t id = TokenToId(text.substr(syms[left].begin, len));
    if (!IsTextToken(id)) return;
    queue.push({Score(id), left, right, len});
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int64_t>(i) - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = syms[bigram.left];
    Symbol& right = syms[bigram.right];
    // Symbols only grow rightwards, so an unchanged combined length means neither side moved.
    if (left.len == 0 || right.len == 0 || left.len + right.len != bigram.len) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int64_t i = 0; i != -1; i = syms[i].next) {
    const std::string_view piece = text.substr(syms[i].begin, syms[i].len);
    if (const int32_t id = TokenToId(piece); IsTextToken(id)) {
      out->push_back(id);
      continue;
    }
    // Only single characters can miss (merges always form tokens). Byte fallback needs a
    // token for every byte; otherwise the character is unknown, as in SentencePiece/HF.
    bool all_bytes = true;
    for (char c : piece) all_bytes = all_bytes && byte_tokens_[static_cast<uint8_t>(c)] >= 0;
    if (all_bytes) {
      for (char c : piece) out->push_back(byte_tokens_[static_cast<uint8_t>(c)]);
    } else if (vocab_.unk_id >= 0) {
      out->push_back(vocab_.unk_id);
    }
  }
}

void Tokenizer::EncodeBpe(std::string_view text, std::vector<int32_t>* out) const {
  // llama.cpp replaces ill-formed UTF-8 with U+FFFD before splitting; do the same so the
  // regex classes are well defined.
  std::string sanitized;
  if (!IsValidUtf8(text)) {
    sanitized = SanitizeUtf8(text);
    text = sanitized;
  }
  std::string encoded;
  for (std::string_view word : pre_->Split(text)) {
    if (vocab_.ignore_merges) {
      // Llama 3: a word that is already a token is not merged from bytes (that could give a
      // different segmentation).
      encoded.clear();
      for (char c : word) encoded += byte_level_[static_cast<uint8_t>(c)];
      if (const int32_t id = TokenToId(encoded); id >= 0) {
        out->push_back(id);
        continue;
      }
    }
    EncodeBpeWord(word, out);
  }
}

// Byte-level BPE on one pre-tokenized word: start from one symbol per byte and repeatedly apply
// the lowest-rank merge among adjacent pairs (leftmost on ties), as llm_tokenizer_bpe does.
void Tokenizer::EncodeBpeWord(std::string_view word, std::vector<int32_t>* out) const {
  struct Symbol {
    int32_t id;  // -1 if the byte has no token (malformed vocab)
    int64_t prev;
    int64_t next;
    bool alive;
  };
  struct Pair {
    int32_t rank;
    int64_t left;
    int64_t right;
    int32_t left_id;  // ids when queued: a merge changes the id, so a mismatch means stale
    int32_t right_id;
    int32_t result;
  };
  struct Worse {
    bool operator()(const Pair& a, const Pair& b) const {
      return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
  };

  const int64_t n = static_cast<int64_t>(word.size());
  std::vector<Symbol> syms(n);
  for (int64_t i = 0; i < n; ++i) {
    syms[i] = {byte_tokens_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  std::priority_queue<Pair, std::vector<Pair>, Worse> queue;
  const auto try_add = [&](int64_t left, int64_t right) {
    if (left < 0 || right < 0) return;
    const int32_t l = syms[left].id, r = syms[right].id;
    if (l < 0 || r < 0) return;
    auto it = merges_.find((static_cast<uint64_t>(l) << 32) | static_cast<uint32_t>(r));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, right, l, r, it->second.result});
  };
  for (int64_t i = 1; i < n; ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& left = syms[p.left];
    Symbol& right = syms[p.right];
    if (!left.alive || !right.alive || left.id != p.left_id || right.id != p.right_id) continue;
    left.id = p.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = p.left;
    try_add(left.prev, p.left);
    try_add(p.left, left.next);
  }

  for (int64_t i = 0; i >= 0 && i < n; i = syms[i].next) {
    if (syms[i].id >= 0) {
      out->push_back(syms[i].id);
    } else if (vocab_.unk_id >= 0) {
      out->push_back(vocab_.unk_id);
    }
  }
}

}  // namespace textgen
