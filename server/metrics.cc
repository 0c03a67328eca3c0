#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace textgen::server {
namespace {

bool ValidName(std::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                    (allow_colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// HELP text escapes only backslash and newline (format 0.0.4).
std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="x",b="y"} (plus `extra` such as le="0.5"); empty when there are no labels at all.
std::string LabelSet(const std::vector<std::string>& names, const std::vector<std::string>& values,
                     const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&out, out.empty() ? "" : ",", names[i], "=\"", EscapeLabelValue(values[i]),
                    "\"");
  }
  if (!extra.empty()) absl::StrAppend(&out, out.empty() ? "" : ",", extra);
  return out.empty() ? out : absl::StrCat("{", out, "}");
}

const char* TypeName(MetricsRegistry::Type type) {
  switch (type) {
    case MetricsRegistry::Type::kCounter:
      return "counter";
    case MetricsRegistry::Type::kGauge:
      return "gauge";
    case MetricsRegistry::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

void Counter::Increment(double delta) {
  if (!(delta > 0)) return;
  value_.fetch_add(delta, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  // The first bucket whose upper bound is >= value (le is inclusive); past the end = +Inf.
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  absl::MutexLock lock(&mu_);
  ++counts_[i];
  sum_ += value;
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds = bounds_;
  absl::MutexLock lock(&mu_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = sum_;
  return s;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> b;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) b.push_back(v);
  return b;
}

MetricsRegistry::Family::Child& MetricsRegistry::Family::Get(
    const std::vector<std::string>& values) {
  std::vector<std::string> key = values;
  key.resize(label_names_.size());
  absl::MutexLock lock(&mu_);
  return children_[key];
}

Counter& MetricsRegistry::Family::CounterAt(const std::vector<std::string>& values) {
  Child& c = Get(values);
  absl::MutexLock lock(&mu_);
  if (c.counter == nullptr) c.counter = std::make_unique<server::Counter>();
  return *c.counter;
}

Gauge& MetricsRegistry::Family::GaugeAt(const std::vector<std::string>& values) {
  Child& c = Get(values);
  absl::MutexLock lock(&mu_);
  if (c.gauge == nullptr) c.gauge = std::make_unique<server::Gauge>();
  return *c.gauge;
}

Histogram& MetricsRegistry::Family::HistogramAt(const std::vector<std::string>& values) {
  Child& c = Get(values);
  absl::MutexLock lock(&mu_);
  if (c.histogram == nullptr) c.histogram = std::make_unique<server::Histogram>(bounds_);
  return *c.histogram;
}

absl::StatusOr<MetricsRegistry::Family*> MetricsRegistry::AddCounter(
    std::string name, std::string help, std::vector<std::string> label_names) {
  return Add(std::move(name), std::move(help), Type::kCounter, std::move(label_names), {});
}

absl::StatusOr<MetricsRegistry::Family*> MetricsRegistry::AddGauge(
    std::string name, std::string help, std::vector<std::string> label_names) {
  return Add(std::move(name), std::move(help), Type::kGauge, std::move(label_names), {});
}

absl::StatusOr<MetricsRegistry::Family*> MetricsRegistry::AddHistogram(
    std::string name, std::string help, std::vector<double> bounds,
    std::vector<std::string> label_names) {
  if (bounds.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("histogram ", name, " has no buckets"));
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1]))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram ", name, " bucket bounds must be finite and strictly increasing"));
    }
  }
  return Add(std::move(name), std::move(help), Type::kHistogram, std::move(label_names),
             std::move(bounds));
}

absl::StatusOr<MetricsRegistry::Family*> MetricsRegistry::Add(std::string name, std::string help,
                                                              Type type,
                                                              std::vector<std::string> label_names,
                                                              std::vector<double> bounds) {
  if (!ValidName(name, /*allow_colon=*/true)) {
    return absl::InvalidArgumentError(absl::StrCat("bad metric name \"", name, "\""));
  }
  for (const std::string& l : label_names) {
    if (!ValidName(l, /*allow_colon=*/false) || l.starts_with("__") ||
        (type == Type::kHistogram && l == "le")) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad label name \"", l, "\" for metric ", name));
    }
  }
  auto family = std::make_unique<Family>();
  family->name_ = name;
  family->help_ = std::move(help);
  family->type_ = type;
  family->label_names_ = std::move(label_names);
  family->bounds_ = std::move(bounds);
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = families_.emplace(name, std::move(family));
  if (!inserted) {
    return absl::InvalidArgumentError(absl::StrCat("metric ", name, " is already registered"));
  }
  return it->second.get();
}

void MetricsRegistry::AddCollector(std::function<void()> collector) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::string MetricsRegistry::Render() const {
  std::vector<std::function<void()>> collectors;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
  }
  // Outside the registry lock: collectors set gauges, which lock their families.
  for (const auto& c : collectors) c();

  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, f] : families_) {
    absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(f->help_), "\n# TYPE ", name, " ",
                    TypeName(f->type_), "\n");
    absl::MutexLock family_lock(&f->mu_);
    for (const auto& [values, child] : f->children_) {
      switch (f->type_) {
        case Type::kCounter:
          if (child.counter == nullptr) break;
          absl::StrAppend(&out, name, LabelSet(f->label_names_, values), " ",
                          FormatSampleValue(child.counter->value()), "\n");
          break;
        case Type::kGauge:
          if (child.gauge == nullptr) break;
          absl::StrAppend(&out, name, LabelSet(f->label_names_, values), " ",
                          FormatSampleValue(child.gauge->value()), "\n");
          break;
        case Type::kHistogram: {
          if (child.histogram == nullptr) break;
          const Histogram::Snapshot s = child.histogram->Read();
          for (size_t i = 0; i < s.cumulative.size(); ++i) {
            const std::string le =
                i < s.bounds.size() ? FormatSampleValue(s.bounds[i]) : std::string("+Inf");
            absl::StrAppend(&out, name, "_bucket",
                            LabelSet(f->label_names_, values, absl::StrCat("le=\"", le, "\"")), " ",
                            s.cumulative[i], "\n");
          }
          absl::StrAppend(&out, name, "_sum", LabelSet(f->label_names_, values), " ",
                          FormatSampleValue(s.sum), "\n", name, "_count",
                          LabelSet(f->label_names_, values), " ", s.count, "\n");
          break;
        }
      }
    }
  }
  return out;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  // Shortest text that reads back as the same double (0.1, not 0.10000000000000001).
  char buf[32];
  const auto r = std::fabs(value) >= 1e-6
                     ? std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::fixed)
                     : std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, r.ptr);
}

}  // namespace textgen::server
