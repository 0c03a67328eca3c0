// SchemaConverter: whether two oneOf branches are provably exclusive, from what each surely
// requires: its types, its enum / const values, its numeric bounds, and for objects a required
// property that the other forbids or requires with an exclusive value (a discriminator).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/grammar/json_schema_converter.h"
#include "engine/util/status_macros.h"

namespace textgen::json_schema_internal {
namespace {

constexpr int kMaxDepth = 3;  // discriminators nested in discriminators

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

bool SchemaConverter::Summary::Forbids(const std::string& name) const {
  if (Contains(false_properties, name)) return true;
  return std::any_of(closed.begin(), closed.end(), [&](const std::vector<std::string>& allowed) {
    return !Contains(allowed, name);
  });
}

absl::StatusOr<SchemaConverter::Summary> SchemaConverter::Summarize(const Conj& conj,
                                                                    uint8_t types) {
  Summary s;
  s.conj = conj;
  s.types = conj.never ? 0 : types;
  for (const Part& p : conj.parts) {
    if (const Json* t = Keyword(p, "type")) s.types &= TypeMask(*t);
    std::optional<std::vector<Json>> mine;
    if (const Json* e = Keyword(p, "enum")) mine = e->get<std::vector<Json>>();
    if (const Json* c = Keyword(p, "const")) mine = std::vector<Json>{*c};
    if (mine) {
      if (!s.values) {
        s.values = std::move(mine);
      } else {
        std::vector<Json> kept;
        for (const Json& v : *s.values) {
          if (std::find(mine->begin(), mine->end(), v) != mine->end()) kept.push_back(v);
        }
        s.values = std::move(kept);
      }
    }
    const auto bound = [&](const char* key, bool lower, bool exclusive) {
      const Json* v = Keyword(p, key);
      if (v == nullptr || !v->is_number()) return;
      const double d = v->get<double>();
      if (lower && (d > s.min || (d == s.min && exclusive))) s.min = d, s.min_exclusive = exclusive;
      if (!lower && (d < s.max || (d == s.max && exclusive)))
        s.max = d, s.max_exclusive = exclusive;
    };
    const Json* xmin = Keyword(p, "exclusiveMinimum");
    const Json* xmax = Keyword(p, "exclusiveMaximum");
    bound("minimum", true, xmin && xmin->is_boolean() && xmin->get<bool>());
    bound("maximum", false, xmax && xmax->is_boolean() && xmax->get<bool>());
    bound("exclusiveMinimum", true, true);
    bound("exclusiveMaximum", false, true);
    if (const Json* req = Keyword(p, "required")) {
      for (const Json& r : *req) s.required.push_back(r.get<std::string>());
    }
    const Json* props = Keyword(p, "properties");
    if (props != nullptr) {
      for (const auto& [name, value] : props->items()) {
        if (value.is_boolean() && !value.get<bool>()) s.false_properties.push_back(name);
      }
    }
    const Json* extra = Keyword(p, "additionalProperties");
    if (extra != nullptr && extra->is_boolean() && !extra->get<bool>()) {
      std::vector<std::string> allowed;
      if (props != nullptr) {
        for (const auto& [name, value] : props->items()) allowed.push_back(name);
      }
      s.closed.push_back(std::move(allowed));
    }
  }
  return s;
}

absl::StatusOr<bool> SchemaConverter::Disjoint(const Summary& a, const Summary& b, int depth) {
  const uint8_t common = a.types & b.types;
  for (uint8_t t = 1; t < 128; t <<= 1) {
    if (!(common & t)) continue;
    // Values of this type each side allows, when it lists them.
    const auto listed = [&](const Summary& s) -> std::optional<std::vector<Json>> {
      if (!s.values) return std::nullopt;
      std::vector<Json> out;
      for (const Json& v : *s.values) {
        if (TypeBitsOfValue(v) & t) out.push_back(v);
      }
      return out;
    };
    const auto va = listed(a), vb = listed(b);
    if ((va && va->empty()) || (vb && vb->empty())) continue;
    if (va && vb) {
      const bool overlap = std::any_of(va->begin(), va->end(), [&](const Json& v) {
        return std::find(vb->begin(), vb->end(), v) != vb->end();
      });
      if (overlap) return false;
      continue;
    }
    if (t == kInteger || t == kNumber) {
      const auto below = [](const Summary& x, const Summary& y) {  // x entirely below y
        return x.max < y.min || (x.max == y.min && (x.max_exclusive || y.min_exclusive));
      };
      if (below(a, b) || below(b, a)) continue;
      return false;
    }
    if (t != kObject) return false;
    bool separated = false;
    for (const auto& [x, y] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
      for (const std::string& name : x->required) {
        if (y->Forbids(name)) separated = true;
      }
    }
    for (size_t i = 0; !separated && depth < kMaxDepth && i < a.required.size(); ++i) {
      TG_RETURN_IF_ERROR(b_.CheckDeadline());
      const std::string& name = a.required[i];
      if (std::find(b.required.begin(), b.required.end(), name) == b.required.end()) continue;
      Summary values[2];
      for (int side = 0; side < 2; ++side) {
        const Summary& s = side == 0 ? a : b;
        std::vector<std::string> ptrs;
        for (const Part& p : s.conj.parts) {
          const Json* props = Keyword(p, "properties");
          if (props != nullptr && props->contains(name)) {
            ptrs.push_back(PointerChild(p.ptr + "/properties", name));
          } else if (Keyword(p, "additionalProperties")) {
            ptrs.push_back(p.ptr + "/additionalProperties");
          }
        }
        TG_ASSIGN_OR_RETURN(Conj c, Flatten(ptrs));
        TG_ASSIGN_OR_RETURN(values[side], Summarize(c, kAllTypes));
      }
      TG_ASSIGN_OR_RETURN(separated, Disjoint(values[0], values[1], depth + 1));
    }
    if (!separated) return false;
  }
  return true;
}

}  // namespace textgen::json_schema_internal
