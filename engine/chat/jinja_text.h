// Text helpers that make the interpreter's strings behave like Python's str: code-point
// indexing, Python's notion of whitespace, and repr() of strings and floats.
#ifndef TEXTGEN_ENGINE_CHAT_JINJA_TEXT_H_
#define TEXTGEN_ENGINE_CHAT_JINJA_TEXT_H_

#include <string>
#include <string_view>
#include <vector>

namespace textgen::jinja {

// UTF-8 <-> code points. An invalid byte decodes to itself as a code point (U+0080..U+00FF) so
// that nothing is lost; chat input is valid UTF-8.
std::u32string Utf8ToCodepoints(std::string_view s);
std::string CodepointsToUtf8(std::u32string_view s);
size_t Utf8Length(std::string_view s);

// Python str.isspace() for one code point.
bool IsPySpace(char32_t c);

// Python str.strip / lstrip / rstrip: `chars` empty-and-unset strips whitespace.
std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right);
// Python str.split(sep, maxsplit) (sep null: runs of whitespace) and rsplit.
std::vector<std::string> PySplit(std::string_view s, const std::string* sep, long maxsplit);
std::vector<std::string> PyRSplit(std::string_view s, const std::string* sep, long maxsplit);
// Python str.splitlines() (without keepends).
std::vector<std::string> PySplitLines(std::string_view s);
// Python str.replace(old, new, count) (count < 0: all).
std::string PyReplace(std::string_view s, std::string_view old_s, std::string_view new_s,
                      long count);
// Python str.upper / lower / title / capitalize. Case mapping covers ASCII, Latin-1, Latin
// Extended-A, Greek and Cyrillic (what chat templates apply it to: roles and names).
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);
std::string PyCapitalize(std::string_view s);

// Python repr() of a str: single quotes unless the text holds ' and no ".
std::string PyStrRepr(std::string_view s);
// Python repr() of a float ("1.0", "0.1", "1e+16", "inf", "nan").
std::string PyFloatRepr(double d);
// A JSON string literal as json.dumps writes it (ensure_ascii: \uXXXX for non-ASCII).
std::string JsonQuote(std::string_view s, bool ensure_ascii);

}  // namespace textgen::jinja

#endif  // TEXTGEN_ENGINE_CHAT_JINJA_TEXT_H_
