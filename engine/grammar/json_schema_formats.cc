// The `format` grammars (string content between the quotes; see json_schema.h for what each
// accepts). Every format's texts are printable ASCII without " or \, so they are raw JSON.
#include <string>
#include <vector>

#include "engine/grammar/json_schema_pieces.h"

namespace textgen::json_schema_internal {
namespace {

constexpr std::string_view kFormats[] = {"date", "time", "date-time", "email",
                                         "uuid", "ipv4", "ipv6",      "hostname"};

}  // namespace

bool JsonPieces::IsKnownFormat(std::string_view name) {
  for (std::string_view f : kFormats) {
    if (f == name) return true;
  }
  return false;
}

Expr JsonPieces::Format(std::string_view name) {
  if (name == "date") return Shared("date", &JsonPieces::BuildDate);
  if (name == "time") return Shared("time", &JsonPieces::BuildTime);
  if (name == "date-time") return Shared("date-time", &JsonPieces::BuildDateTime);
  if (name == "email") return Shared("email", &JsonPieces::BuildEmail);
  if (name == "uuid") return Shared("uuid", &JsonPieces::BuildUuid);
  if (name == "ipv4") return Shared("ipv4", &JsonPieces::BuildIpv4);
  if (name == "ipv6") return Shared("ipv6", &JsonPieces::BuildIpv6);
  if (name == "hostname") return Shared("hostname", &JsonPieces::BuildHostname);
  return b_.Never();
}

// full-date: years 0001-9999, each month's days, 29 February in leap years only.
Expr JsonPieces::BuildDate() {
  const Expr d = Digit();
  const Expr nz = Digit('1', '9');
  const Expr year = b_.Alt(
      {b_.Seq({d, d, d, nz}), b_.Seq({d, d, nz, d}), b_.Seq({d, nz, d, d}), b_.Seq({nz, d, d, d})});
  const Expr day28 = b_.Alt({b_.Seq({b_.Literal("0"), nz}), b_.Seq({b_.Literal("1"), d}),
                             b_.Seq({b_.Literal("2"), Digit('0', '8')})});
  const Expr day30 = b_.Alt({day28, b_.Literal("29"), b_.Literal("30")});
  const Expr day31 = b_.Alt({day30, b_.Literal("31")});
  std::vector<Expr> long_months, short_months;
  for (const char* m : {"01", "03", "05", "07", "08", "10", "12"}) {
    long_months.push_back(b_.Literal(m));
  }
  for (const char* m : {"04", "06", "09", "11"}) short_months.push_back(b_.Literal(m));
  const Expr month_day = b_.Alt({b_.Seq({b_.Alt(long_months), b_.Literal("-"), day31}),
                                 b_.Seq({b_.Alt(short_months), b_.Literal("-"), day30}),
                                 b_.Seq({b_.Literal("02-"), day28})});
  // Leap years: divisible by 4 but not by 100 (the last two digits a non-zero multiple of 4),
  // or divisible by 400 (the first two digits a multiple of 4, and not 0000).
  CodePointSet evens, odds, nonzero_evens, x48, x048, x26;
  for (char c : std::string_view("02468")) evens.Add(c, c);
  for (char c : std::string_view("13579")) odds.Add(c, c);
  for (char c : std::string_view("2468")) nonzero_evens.Add(c, c);
  for (char c : std::string_view("48")) x48.Add(c, c);
  for (char c : std::string_view("048")) x048.Add(c, c);
  for (char c : std::string_view("26")) x26.Add(c, c);
  const Expr mult4_not0 = b_.Alt({b_.Seq({b_.Chars(evens), b_.Chars(x48)}),
                                  b_.Seq({b_.Chars(nonzero_evens), b_.Literal("0")}),
                                  b_.Seq({b_.Chars(odds), b_.Chars(x26)})});
  const Expr century =
      b_.Alt({b_.Seq({b_.Chars(nonzero_evens), b_.Chars(x048)}),
              b_.Seq({b_.Literal("0"), b_.Chars(x48)}), b_.Seq({b_.Chars(odds), b_.Chars(x26)})});
  const Expr leap_year = b_.Alt({b_.Seq({d, d, mult4_not0}), b_.Seq({century, b_.Literal("00")})});
  return b_.Alt(
      {b_.Seq({year, b_.Literal("-"), month_day}), b_.Seq({leap_year, b_.Literal("-02-29")})});
}

// full-time: HH:MM:SS[.fraction] and Z or a numeric offset.
Expr JsonPieces::BuildTime() {
  const Expr hour =
      b_.Alt({b_.Seq({Digit('0', '1'), Digit()}), b_.Seq({b_.Literal("2"), Digit('0', '3')})});
  const Expr sixty = b_.Seq({Digit('0', '5'), Digit()});
  CodePointSet sign;
  sign.Add('+', '+');
  sign.Add('-', '-');
  const Expr offset =
      b_.Alt({b_.Literal("Z"), b_.Seq({b_.Chars(sign), hour, b_.Literal(":"), sixty})});
  return b_.Seq({hour, b_.Literal(":"), sixty, b_.Literal(":"), sixty,
                 b_.Optional(b_.Seq({b_.Literal("."), b_.Repeat(Digit(), 1, 9)})), offset});
}

Expr JsonPieces::BuildDateTime() {
  return b_.Seq({Format("date"), b_.Literal("T"), Format("time")});
}

Expr JsonPieces::BuildUuid() {
  const Expr h = HexDigit();
  return b_.Seq({b_.Repeat(h, 8, 8), b_.Literal("-"), b_.Repeat(h, 4, 4), b_.Literal("-"),
                 b_.Repeat(h, 4, 4), b_.Literal("-"), b_.Repeat(h, 4, 4), b_.Literal("-"),
                 b_.Repeat(h, 12, 12)});
}

// Dotted decimal, octets 0-255 without leading zeros.
Expr JsonPieces::BuildIpv4() {
  const Expr d = Digit();
  const Expr octet = b_.Alt({b_.Seq({b_.Literal("25"), Digit('0', '5')}),
                             b_.Seq({b_.Literal("2"), Digit('0', '4'), d}),
                             b_.Seq({b_.Literal("1"), d, d}), b_.Seq({Digit('1', '9'), d}), d});
  return b_.Seq({octet, b_.Repeat(b_.Seq({b_.Literal("."), octet}), 3, 3)});
}

// Eight groups of 1-4 hex digits, or fewer around one "::" (which stands for at least one
// zero group).
Expr JsonPieces::BuildIpv6() {
  const Expr h16 = b_.Repeat(HexDigit(), 1, 4);
  const auto groups = [&](int n) {  // exactly n >= 1 groups
    return b_.Seq({h16, b_.Repeat(b_.Seq({b_.Literal(":"), h16}), n - 1, n - 1)});
  };
  std::vector<Expr> forms = {groups(8)};
  for (int left = 0; left <= 7; ++left) {
    const int right_max = 7 - left;
    const Expr right =
        right_max == 0 ? b_.Empty()
                       : b_.Optional(b_.Seq(
                             {h16, b_.Repeat(b_.Seq({b_.Literal(":"), h16}), 0, right_max - 1)}));
    forms.push_back(b_.Seq({left == 0 ? b_.Empty() : groups(left), b_.Literal("::"), right}));
  }
  return b_.Alt(std::move(forms));
}

// RFC 1123 labels (letters, digits, inner hyphens) of at most 62 characters, at most 4 of
// them: at most 251 characters, under the 253 that DNS allows.
Expr JsonPieces::BuildHostname() {
  CodePointSet alnum = CodePointSet::Range('0', '9');
  alnum.Add('a', 'z');
  alnum.Add('A', 'Z');
  CodePointSet inner = alnum;
  inner.Add('-', '-');
  const Expr label = b_.Seq(
      {b_.Chars(alnum), b_.Optional(b_.Seq({b_.Repeat(b_.Chars(inner), 0, 60), b_.Chars(alnum)}))});
  return b_.Seq({label, b_.Repeat(b_.Seq({b_.Literal("."), label}), 0, 3)});
}

// local-part "@" hostname, the local part a dot-atom of at most 4 atoms of at most 64
// characters (RFC 5322 atext).
Expr JsonPieces::BuildEmail() {
  CodePointSet atext = CodePointSet::Range('0', '9');
  atext.Add('a', 'z');
  atext.Add('A', 'Z');
  for (char c : std::string_view("!#$%&'*+/=?^_`{|}~-")) atext.Add(c, c);
  const Expr atom = b_.Repeat(b_.Chars(atext), 1, 64);
  return b_.Seq({atom, b_.Repeat(b_.Seq({b_.Literal("."), atom}), 0, 3), b_.Literal("@"),
                 Format("hostname")});
}

}  // namespace textgen::json_schema_internal
