#include "tests/support/metrics_scrape.h"

#include <httplib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

namespace textgen::testing {
namespace {

// The family a sample belongs to: histograms add _bucket, _sum and _count.
std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.ends_with(s)) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

}  // namespace

double Exposition::Get(const std::string& name,
                       const std::map<std::string, std::string>& labels) const {
  for (const Sample& s : samples) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  FAIL("no sample " << name << " with the given labels");
  return 0;
}

std::vector<Sample> Exposition::All(const std::string& name) const {
  std::vector<Sample> out;
  for (const Sample& s : samples) {
    if (s.name == name) out.push_back(s);
  }
  return out;
}

Exposition ParseExposition(const std::string& text) {
  Exposition e;
  std::map<std::string, int> helps;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    INFO("line: " << line);
    if (line.starts_with("# HELP ")) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      REQUIRE(++helps[name] == 1);
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      std::istringstream ls(line.substr(7));
      std::string name, type;
      ls >> name >> type;
      REQUIRE(helps.count(name) == 1);  // HELP first, as the registry writes them
      REQUIRE((type == "counter" || type == "gauge" || type == "histogram"));
      REQUIRE(e.types.emplace(name, type).second);
      continue;
    }
    REQUIRE(!line.empty());
    REQUIRE(line[0] != '#');
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (line[i] == '{') {
      ++i;
      while (line[i] != '}') {
        const size_t eq = line.find('=', i);
        REQUIRE(eq != std::string::npos);
        const std::string key = line.substr(i, eq - i);
        REQUIRE(line[eq + 1] == '"');
        std::string value;
        size_t j = eq + 2;
        for (; line[j] != '"'; ++j) {
          REQUIRE(j + 1 < line.size());
          if (line[j] == '\\') {
            ++j;
            value += line[j] == 'n' ? '\n' : line[j];
          } else {
            value += line[j];
          }
        }
        s.labels[key] = value;
        i = j + 1;
        if (line[i] == ',') ++i;
      }
      ++i;
    }
    REQUIRE(line[i] == ' ');
    const std::string v = line.substr(i + 1);
    s.value = v == "+Inf" ? INFINITY : std::stod(v);
    // A TYPE line precedes every sample of its family.
    REQUIRE(e.types.count(FamilyOf(s.name, e.types)) == 1);
    e.samples.push_back(std::move(s));
  }
  return e;
}

Exposition ScrapeMetrics(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  auto res = client.Get("/metrics");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  CHECK_THAT(res->get_header_value("Content-Type"), Catch::StartsWith("text/plain; version=0.0.4"));
  return ParseExposition(res->body);
}

}  // namespace textgen::testing
