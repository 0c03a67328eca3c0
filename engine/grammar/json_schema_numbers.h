// Numeric bounds as exact decimals, and the grammar of the decimals in a range: an integer
// part by digit ranges (as llama.cpp's _generate_min_max_int), a fraction constrained
// digit by digit at the range's ends.
#ifndef TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_NUMBERS_H_
#define TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_NUMBERS_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "engine/grammar/json_schema_ir.h"

namespace textgen::json_schema_internal {

// An exact decimal: sign, integer digits (no leading zeros; "0" for zero), fraction digits (no
// trailing zeros). Zero is never negative.
struct Decimal {
  bool negative = false;
  std::string int_digits = "0";
  std::string frac_digits;

  bool is_zero() const { return int_digits == "0" && frac_digits.empty(); }
  std::string ToString() const;
};

// A JSON number's text ("-12.5e+3"); nullopt if it is not one.
std::optional<Decimal> ParseDecimal(std::string_view text);
int CompareDecimal(const Decimal& a, const Decimal& b);  // <0, 0, >0
// a + sign * 10^-digits (sign +1 or -1).
Decimal AddUnit(const Decimal& a, int digits, int sign);
// Rounded to `digits` fraction digits towards +infinity (Ceil) or -infinity (Floor).
Decimal CeilTo(const Decimal& a, int digits);
Decimal FloorTo(const Decimal& a, int digits);

// The smallest (lower) or largest (upper) decimal with at most `frac_digits` fraction digits
// (0 for `integer`) that satisfies the bound `value` (a JSON number; `exclusive` for
// exclusiveMinimum / exclusiveMaximum) both exactly and as validators compare it: a decimal
// with a fraction or exponent is read as a double (then compared as a double), one without
// as an integer (compared exactly). InvalidArgument-worthy values (not a finite number) give
// nullopt.
std::optional<Decimal> LowerBound(const nlohmann::ordered_json& value, bool exclusive,
                                  int frac_digits);
std::optional<Decimal> UpperBound(const nlohmann::ordered_json& value, bool exclusive,
                                  int frac_digits);

// The JSON numbers in [lo, hi] (either side optional, both on the `frac_digits` grid): no
// exponent, at most `frac_digits` fraction digits, integer parts of at most `int_digits`
// digits unless a bound has more. Never if the range is empty.
GbnfBuilder::Expr NumberRange(GbnfBuilder& b, const std::optional<Decimal>& lo,
                              const std::optional<Decimal>& hi, int int_digits, int frac_digits);

}  // namespace textgen::json_schema_internal

#endif  // TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_NUMBERS_H_
