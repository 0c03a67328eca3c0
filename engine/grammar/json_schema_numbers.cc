#include "engine/grammar/json_schema_numbers.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

namespace textgen::json_schema_internal {
namespace {

using Expr = GbnfBuilder::Expr;

void Normalize(Decimal& d) {
  const size_t nz = d.int_digits.find_first_not_of('0');
  d.int_digits = nz == std::string::npos ? "0" : d.int_digits.substr(nz);
  while (!d.frac_digits.empty() && d.frac_digits.back() == '0') d.frac_digits.pop_back();
  if (d.is_zero()) d.negative = false;
}

// Magnitudes as digit strings scaled by 10^scale (no sign).
std::string Scaled(const Decimal& d, size_t scale) {
  std::string frac = d.frac_digits;
  frac.resize(scale, '0');
  return d.int_digits + frac;
}
Decimal FromScaled(std::string digits, size_t scale, bool negative) {
  if (digits.size() <= scale) digits.insert(0, scale + 1 - digits.size(), '0');
  Decimal d;
  d.negative = negative;
  d.int_digits = digits.substr(0, digits.size() - scale);
  d.frac_digits = digits.substr(digits.size() - scale);
  Normalize(d);
  return d;
}
int CompareMagnitude(std::string a, std::string b) {
  const size_t n = std::max(a.size(), b.size());
  a.insert(0, n - a.size(), '0');
  b.insert(0, n - b.size(), '0');
  return a.compare(b) < 0 ? -1 : a == b ? 0 : 1;
}
std::string AddMagnitude(const std::string& a, const std::string& b) {
  std::string out;
  int carry = 0;
  for (size_t i = 0; i < std::max(a.size(), b.size()) || carry; ++i) {
    int s = carry;
    if (i < a.size()) s += a[a.size() - 1 - i] - '0';
    if (i < b.size()) s += b[b.size() - 1 - i] - '0';
    out += static_cast<char>('0' + s % 10);
    carry = s / 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}
std::string SubMagnitude(const std::string& a, const std::string& b) {  // a >= b
  std::string out;
  int borrow = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    int s = (a[a.size() - 1 - i] - '0') - borrow - (i < b.size() ? b[b.size() - 1 - i] - '0' : 0);
    borrow = s < 0;
    out += static_cast<char>('0' + (s + 10) % 10);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::string Shortest(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}
// The exact value of an integer-valued double.
Decimal ExactIntegral(double v) {
  char buf[400];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, 0);
  return *ParseDecimal(std::string_view(buf, r.ptr - buf));
}

Decimal JsonInteger(const nlohmann::ordered_json& v) {
  return *ParseDecimal(v.is_number_unsigned() ? std::to_string(v.get<uint64_t>())
                                              : std::to_string(v.get<int64_t>()));
}

// The nearest double on the `up` side of the integer b (b itself when representable).
double DoubleAtLeast(const Decimal& b, bool up, bool strictly) {
  double d = std::strtod(b.ToString().c_str(), nullptr);
  const int c = CompareDecimal(ExactIntegral(d), b);
  if (up ? (c < 0 || (strictly && c == 0)) : (c > 0 || (strictly && c == 0))) {
    d = std::nextafter(d, up ? INFINITY : -INFINITY);
  }
  return d;
}

std::optional<Decimal> Bound(const nlohmann::ordered_json& value, bool exclusive, int frac_digits,
                             bool lower) {
  if (!value.is_number()) return std::nullopt;
  const int dir = lower ? 1 : -1;
  const auto round = [&](const Decimal& d) {
    return lower ? CeilTo(d, frac_digits) : FloorTo(d, frac_digits);
  };
  if (value.is_number_integer()) {
    const Decimal b = JsonInteger(value);
    if (!exclusive) {
      if (frac_digits == 0) return b;
      const Decimal as_double = *ParseDecimal(Shortest(DoubleAtLeast(b, lower, false)));
      return round(
          lower
              ? std::max(b, as_double, [](auto& x, auto& y) { return CompareDecimal(x, y) < 0; })
              : std::min(b, as_double, [](auto& x, auto& y) { return CompareDecimal(x, y) < 0; }));
    }
    const Decimal step = AddUnit(b, frac_digits, dir);
    if (frac_digits == 0) return step;
    const Decimal as_double = *ParseDecimal(Shortest(DoubleAtLeast(b, lower, true)));
    const bool step_wins =
        lower ? CompareDecimal(step, as_double) > 0 : CompareDecimal(step, as_double) < 0;
    return round(step_wins ? step : as_double);
  }
  const double d = value.get<double>();
  if (!std::isfinite(d)) return std::nullopt;
  if (frac_digits == 0) {  // integers compare exactly with the double's value
    if (!exclusive) return ExactIntegral(lower ? std::ceil(d) : std::floor(d));
    return AddUnit(ExactIntegral(lower ? std::floor(d) : std::ceil(d)), 0, dir);
  }
  const double edge = exclusive ? std::nextafter(d, lower ? INFINITY : -INFINITY) : d;
  return round(*ParseDecimal(Shortest(edge)));
}

// --- the grammar ---

Expr DigitRange(GbnfBuilder& b, char lo, char hi) { return b.Chars(CodePointSet::Range(lo, hi)); }
Expr AnyDigits(GbnfBuilder& b, int64_t min, int64_t max) {
  return b.Repeat(DigitRange(b, '0', '9'), min, max);
}

// Digit strings of length l.size() between l and h (same length, l <= h).
Expr SameLength(GbnfBuilder& b, std::string_view l, std::string_view h) {
  if (l.empty()) return b.Empty();
  if (l == h) return b.Literal(l);
  const std::string_view lr = l.substr(1), hr = h.substr(1);
  if (l[0] == h[0]) return b.Seq({b.Literal(l.substr(0, 1)), SameLength(b, lr, hr)});
  const bool l_full = lr.find_first_not_of('0') == std::string_view::npos;
  const bool h_full = hr.find_first_not_of('9') == std::string_view::npos;
  const int n = static_cast<int>(lr.size());
  std::vector<Expr> alts;
  const char mid_lo = l_full ? l[0] : l[0] + 1;
  const char mid_hi = h_full ? h[0] : h[0] - 1;
  if (!l_full) {
    alts.push_back(b.Seq({b.Literal(l.substr(0, 1)), SameLength(b, lr, std::string(n, '9'))}));
  }
  if (mid_lo <= mid_hi) alts.push_back(b.Seq({DigitRange(b, mid_lo, mid_hi), AnyDigits(b, n, n)}));
  if (!h_full) {
    alts.push_back(b.Seq({b.Literal(h.substr(0, 1)), SameLength(b, std::string(n, '0'), hr)}));
  }
  return b.Alt(std::move(alts));
}

// Integers (digit strings without leading zeros) in [lo, hi].
Expr IntRange(GbnfBuilder& b, const std::string& lo, const std::string& hi) {
  if (CompareMagnitude(lo, hi) > 0) return b.Never();
  std::vector<Expr> alts;
  for (size_t len = lo.size(); len <= hi.size(); ++len) {
    const std::string l =
        len == lo.size() ? lo : (len == 1 ? "0" : "1" + std::string(len - 1, '0'));
    const std::string h = len == hi.size() ? hi : std::string(len, '9');
    alts.push_back(SameLength(b, l, h));
  }
  return b.Alt(std::move(alts));
}

// Fraction digit strings d (1..n digits) with 0.d >= 0.s (s non-empty, no trailing zeros).
Expr FracAtLeast(GbnfBuilder& b, std::string_view s, int n) {
  std::vector<Expr> alts;
  if (s[0] < '9') alts.push_back(b.Seq({DigitRange(b, s[0] + 1, '9'), AnyDigits(b, 0, n - 1)}));
  alts.push_back(
      b.Seq({b.Literal(s.substr(0, 1)),
             s.size() == 1 ? AnyDigits(b, 0, n - 1) : FracAtLeast(b, s.substr(1), n - 1)}));
  return b.Alt(std::move(alts));
}
// ... with 0.d <= 0.t (t non-empty, no trailing zeros).
Expr FracAtMost(GbnfBuilder& b, std::string_view t, int n) {
  std::vector<Expr> alts;
  if (t[0] > '0') alts.push_back(b.Seq({DigitRange(b, '0', t[0] - 1), AnyDigits(b, 0, n - 1)}));
  alts.push_back(b.Seq(
      {b.Literal(t.substr(0, 1)), t.size() == 1 ? b.Repeat(b.Literal("0"), 0, n - 1)
                                                : b.Optional(FracAtMost(b, t.substr(1), n - 1))}));
  return b.Alt(std::move(alts));
}
// ... with 0.s <= 0.d <= 0.t (s non-empty, s <= t).
Expr FracBetween(GbnfBuilder& b, std::string_view s, std::string_view t, int n) {
  const std::string_view sr = s.substr(1), tr = t.empty() ? t : t.substr(1);
  if (s[0] == t[0]) {
    Expr rest = !sr.empty()  ? FracBetween(b, sr, tr, n - 1)
                : tr.empty() ? b.Repeat(b.Literal("0"), 0, n - 1)
                             : b.Optional(FracAtMost(b, tr, n - 1));
    return b.Seq({b.Literal(s.substr(0, 1)), rest});
  }
  std::vector<Expr> alts;
  alts.push_back(b.Seq({b.Literal(s.substr(0, 1)),
                        sr.empty() ? AnyDigits(b, 0, n - 1) : FracAtLeast(b, sr, n - 1)}));
  if (t[0] - s[0] >= 2) {
    alts.push_back(b.Seq({DigitRange(b, s[0] + 1, t[0] - 1), AnyDigits(b, 0, n - 1)}));
  }
  alts.push_back(
      b.Seq({b.Literal(t.substr(0, 1)), tr.empty() ? b.Repeat(b.Literal("0"), 0, n - 1)
                                                   : b.Optional(FracAtMost(b, tr, n - 1))}));
  return b.Alt(std::move(alts));
}

// Non-negative decimals in [a, b] (b optional: integer parts of at most int_digits digits).
Expr NonNegative(GbnfBuilder& b, const Decimal& a, const std::optional<Decimal>& hi, int int_digits,
                 int frac_digits) {
  const int n = frac_digits;
  const Expr point = b.Literal(".");
  const Expr any_frac = n == 0 ? b.Empty() : b.Optional(b.Seq({point, AnyDigits(b, 1, n)}));
  const auto at_least = [&](const std::string& s) {
    return s.empty() ? any_frac : b.Seq({point, FracAtLeast(b, s, n)});
  };
  const auto at_most = [&](const std::string& t) {
    if (n == 0) return b.Empty();
    return b.Optional(
        b.Seq({point, t.empty() ? b.Repeat(b.Literal("0"), 1, n) : FracAtMost(b, t, n)}));
  };
  const std::string top =
      hi ? hi->int_digits : std::string(std::max<size_t>(int_digits, a.int_digits.size()), '9');
  if (n == 0) return IntRange(b, a.int_digits, top);
  if (hi && hi->int_digits == a.int_digits) {
    const Expr frac = a.frac_digits.empty()
                          ? at_most(hi->frac_digits)
                          : b.Seq({point, FracBetween(b, a.frac_digits, hi->frac_digits, n)});
    return b.Seq({b.Literal(a.int_digits), frac});
  }
  std::vector<Expr> alts = {b.Seq({b.Literal(a.int_digits), at_least(a.frac_digits)})};
  Decimal lo_int{false, a.int_digits, ""};
  const std::string mid_lo = AddUnit(lo_int, 0, 1).int_digits;
  const std::string mid_hi = hi ? AddUnit(Decimal{false, top, ""}, 0, -1).int_digits : top;
  alts.push_back(b.Seq({IntRange(b, mid_lo, mid_hi), any_frac}));
  if (hi) alts.push_back(b.Seq({b.Literal(top), at_most(hi->frac_digits)}));
  return b.Alt(std::move(alts));
}

}  // namespace

std::string Decimal::ToString() const {
  return (negative ? "-" : "") + int_digits + (frac_digits.empty() ? "" : "." + frac_digits);
}

std::optional<Decimal> ParseDecimal(std::string_view text) {
  Decimal d;
  size_t i = 0;
  if (i < text.size() && text[i] == '-') d.negative = true, ++i;
  std::string digits;
  long point = -1;
  for (; i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.'); ++i) {
    if (text[i] == '.') {
      if (point >= 0) return std::nullopt;
      point = static_cast<long>(digits.size());
    } else {
      digits += text[i];
    }
  }
  if (digits.empty()) return std::nullopt;
  if (point < 0) point = static_cast<long>(digits.size());
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) neg = text[i++] == '-';
    long exp = 0;
    if (i >= text.size()) return std::nullopt;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      exp = std::min(exp * 10 + (text[i] - '0'), 100000L);
    }
    point += neg ? -exp : exp;
  }
  if (i != text.size()) return std::nullopt;
  if (point <= 0) {
    d.int_digits = "0";
    d.frac_digits = std::string(-point, '0') + digits;
  } else if (point >= static_cast<long>(digits.size())) {
    d.int_digits = digits + std::string(point - digits.size(), '0');
  } else {
    d.int_digits = digits.substr(0, point);
    d.frac_digits = digits.substr(point);
  }
  Normalize(d);
  return d;
}

int CompareDecimal(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const size_t scale = std::max(a.frac_digits.size(), b.frac_digits.size());
  const int c = CompareMagnitude(Scaled(a, scale), Scaled(b, scale));
  return a.negative ? -c : c;
}

Decimal AddUnit(const Decimal& a, int digits, int sign) {
  const size_t scale = std::max<size_t>(a.frac_digits.size(), digits);
  const std::string mag = Scaled(a, scale);
  const std::string unit = "1" + std::string(scale - digits, '0');
  const bool same = (sign > 0) != a.negative;  // moving away from zero
  if (same) return FromScaled(AddMagnitude(mag, unit), scale, a.negative);
  if (CompareMagnitude(mag, unit) >= 0)
    return FromScaled(SubMagnitude(mag, unit), scale, a.negative);
  return FromScaled(SubMagnitude(unit, mag), scale, !a.negative);
}

Decimal CeilTo(const Decimal& a, int digits) {
  if (a.frac_digits.size() <= static_cast<size_t>(digits)) return a;
  Decimal t = a;
  t.frac_digits.resize(digits);
  Normalize(t);
  if (a.negative) {
    t.negative = !t.is_zero();
    return t;
  }
  return AddUnit(t, digits, 1);
}

Decimal FloorTo(const Decimal& a, int digits) {
  if (a.frac_digits.size() <= static_cast<size_t>(digits)) return a;
  Decimal t = a;
  t.frac_digits.resize(digits);
  const bool negative = a.negative;
  Normalize(t);
  if (!negative) return t;
  t.negative = true;
  return AddUnit(t, digits, -1);
}

std::optional<Decimal> LowerBound(const nlohmann::ordered_json& value, bool exclusive,
                                  int frac_digits) {
  return Bound(value, exclusive, frac_digits, true);
}
std::optional<Decimal> UpperBound(const nlohmann::ordered_json& value, bool exclusive,
                                  int frac_digits) {
  return Bound(value, exclusive, frac_digits, false);
}

Expr NumberRange(GbnfBuilder& b, const std::optional<Decimal>& lo, const std::optional<Decimal>& hi,
                 int int_digits, int frac_digits) {
  if (lo && hi && CompareDecimal(*lo, *hi) > 0) return b.Never();
  std::vector<Expr> alts;
  const Decimal zero;
  // Negative numbers: "-" and a magnitude of at least one unit (so never "-0").
  if (!lo || lo->negative) {
    const Decimal unit = AddUnit(zero, frac_digits, 1);
    Decimal mag_lo = unit;
    if (hi && hi->negative) mag_lo = Decimal{false, hi->int_digits, hi->frac_digits};
    std::optional<Decimal> mag_hi;
    if (lo) mag_hi = Decimal{false, lo->int_digits, lo->frac_digits};
    if (!mag_hi || CompareDecimal(mag_lo, *mag_hi) <= 0) {
      alts.push_back(
          b.Seq({b.Literal("-"), NonNegative(b, mag_lo, mag_hi, int_digits, frac_digits)}));
    }
  }
  if (!hi || !hi->negative) {
    const Decimal a = (lo && !lo->negative) ? *lo : zero;
    alts.push_back(NonNegative(b, a, hi, int_digits, frac_digits));
  }
  return b.Alt(std::move(alts));
}

}  // namespace textgen::json_schema_internal
