#include "engine/tokenizer/unicode.h"

#include <catch2/catch.hpp>
#include <string>

#include "engine/tokenizer/gpt2_byte_map.h"

namespace textgen {
namespace unicode_test {

TEST_CASE("DecodeUtf8 accepts well-formed sequences", "[tokenizer][unicode]") {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  Utf8Char c = DecodeUtf8(s, 0);
  CHECK((c.status == Utf8Status::kOk && c.codepoint == 'a' && c.length == 1));
  c = DecodeUtf8(s, 1);
  CHECK((c.status == Utf8Status::kOk && c.codepoint == 0xE9 && c.length == 2));
  c = DecodeUtf8(s, 3);
  CHECK((c.status == Utf8Status::kOk && c.codepoint == 0x20AC && c.length == 3));
  c = DecodeUtf8(s, 6);
  CHECK((c.status == Utf8Status::kOk && c.codepoint == 0x1F600 && c.length == 4));
}

TEST_CASE("DecodeUtf8 rejects ill-formed sequences by maximal subpart", "[tokenizer][unicode]") {
  struct Case {
    std::string bytes;
    Utf8Status status;
    size_t length;
  };
  const Case cases[] = {
      {"\x80", Utf8Status::kInvalid, 1},         {"\xC0\x80", Utf8Status::kInvalid, 1},
      {"\xC1\xBF", Utf8Status::kInvalid, 1},     {"\xE0\x80\x80", Utf8Status::kInvalid, 1},
      {"\xED\xA0\x80", Utf8Status::kInvalid, 1}, {"\xF4\x90\x80\x80", Utf8Status::kInvalid, 1},
      {"\xF5\x80", Utf8Status::kInvalid, 1},     {"\xFF", Utf8Status::kInvalid, 1},
      {"\xE4\xBD\x41", Utf8Status::kInvalid, 2}, {"\xF0\x9F\x98\x41", Utf8Status::kInvalid, 3},
      {"\xE4\xBD", Utf8Status::kTruncated, 2},   {"\xF0\x9F\x98", Utf8Status::kTruncated, 3},
      {"\xC3", Utf8Status::kTruncated, 1},
  };
  for (const Case& c : cases) {
    const Utf8Char d = DecodeUtf8(c.bytes, 0);
    INFO("case length " << c.bytes.size());
    CHECK(d.status == c.status);
    CHECK(d.length == c.length);
    CHECK(d.codepoint == kReplacementChar);
  }
}

TEST_CASE("SanitizeUtf8 and IncompleteUtf8Tail", "[tokenizer][unicode]") {
  CHECK(SanitizeUtf8("ok \xC3\xA9") == "ok \xC3\xA9");
  CHECK(SanitizeUtf8("a\xFF"
                     "b") ==
        "a\xEF\xBF\xBD"
        "b");
  CHECK(SanitizeUtf8("\xE4\xBD"
                     "A") ==
        "\xEF\xBF\xBD"
        "A");  // one U+FFFD per subpart
  CHECK(SanitizeUtf8("x\xF0\x9F") == "x\xEF\xBF\xBD");
  CHECK(IsValidUtf8(SanitizeUtf8("\xC0\x80\xED\xA0\x80\xF8")));
  CHECK(IncompleteUtf8Tail("") == 0);
  CHECK(IncompleteUtf8Tail("abc") == 0);
  CHECK(IncompleteUtf8Tail("a\xC3") == 1);
  CHECK(IncompleteUtf8Tail("a\xE4\xBD") == 2);
  CHECK(IncompleteUtf8Tail("\xF0\x9F\x98") == 3);
  CHECK(IncompleteUtf8Tail("\xF0\x9F\x98\x80") == 0);
  CHECK(IncompleteUtf8Tail("a\xC0") == 0);     // can never complete
  CHECK(IncompleteUtf8Tail("\xE0\x80") == 0);  // overlong prefix
  CHECK(IncompleteUtf8Tail("\x80\x80") == 0);  // stray continuations
}

TEST_CASE("AppendUtf8 encodes and refuses surrogates", "[tokenizer][unicode]") {
  std::string s;
  AppendUtf8(0x24, &s);
  AppendUtf8(0xA2, &s);
  AppendUtf8(0x20AC, &s);
  AppendUtf8(0x10348, &s);
  CHECK(s == "$\xC2\xA2\xE2\x82\xAC\xF0\x90\x8D\x88");
  s.clear();
  AppendUtf8(0xD800, &s);
  AppendUtf8(0x110000, &s);
  CHECK(s == "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_CASE("Unicode classes", "[tokenizer][unicode]") {
  CHECK(IsUnicodeLetter('a'));
  CHECK(IsUnicodeLetter(0xE9));          // é
  CHECK(IsUnicodeLetter(0x4F60));        // 你
  CHECK(IsUnicodeLetter(0x1780));        // Khmer letter
  CHECK_FALSE(IsUnicodeLetter(0x17B6));  // Khmer vowel sign (Mc)
  CHECK_FALSE(IsUnicodeLetter('1'));
  CHECK_FALSE(IsUnicodeLetter(0x1F600));
  CHECK(IsUnicodeNumber('7'));
  CHECK(IsUnicodeNumber(0x0663));  // Arabic-Indic three
  CHECK(IsUnicodeNumber(0x00BD));  // ½ (No)
  CHECK(IsUnicodeNumber(0x2167));  // Roman numeral eight (Nl)
  CHECK_FALSE(IsUnicodeNumber('x'));
  CHECK(IsUnicodeWhitespace(' '));
  CHECK(IsUnicodeWhitespace('\t'));
  CHECK(IsUnicodeWhitespace(0x3000));
  CHECK(IsUnicodeWhitespace(0x85));
  CHECK_FALSE(IsUnicodeWhitespace(0x200B));  // zero width space is not White_Space
  CHECK_FALSE(IsUnicodeWhitespace(0x1C));
}

TEST_CASE("GPT-2 byte map is a bijection", "[tokenizer][unicode]") {
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = Gpt2ByteToCodepoint(static_cast<uint8_t>(b));
    CHECK(Gpt2CodepointToByte(cp) == b);
    CHECK_FALSE(IsUnicodeWhitespace(cp));
  }
  CHECK(Gpt2ByteToCodepoint(' ') == 0x120);   // 'Ġ'
  CHECK(Gpt2ByteToCodepoint('\n') == 0x10A);  // 'Ċ'
  CHECK(Gpt2CodepointToByte(0x4F60) == -1);
}

}  // namespace unicode_test
}  // namespace textgen
