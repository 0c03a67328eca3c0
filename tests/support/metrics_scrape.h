// A server's Prometheus /metrics, scraped over HTTP and parsed strictly, for end-to-end tests.
#ifndef TEXTGEN_TESTS_SUPPORT_METRICS_SCRAPE_H_
#define TEXTGEN_TESTS_SUPPORT_METRICS_SCRAPE_H_

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace textgen::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// One parsed exposition (text format 0.0.4).
struct Exposition {
  std::map<std::string, std::string> types;  // family -> counter|gauge|histogram
  std::vector<Sample> samples;

  // The one sample with this name and exactly these labels; FAILs the test if absent.
  double Get(const std::string& name, const std::map<std::string, std::string>& labels = {}) const;
  // Every sample with this name, whatever its labels.
  std::vector<Sample> All(const std::string& name) const;
};

// A strict little parser: FAILs the test on a line it does not understand, a sample before its
// family's TYPE, or a family described twice.
Exposition ParseExposition(const std::string& text);

// GET http://127.0.0.1:`port`/metrics, checked to be 200 with the text format's content type.
Exposition ScrapeMetrics(int port);

// Polls the metrics until `done` holds or `timeout_s` passes; returns the last scrape. For what
// a server counts just after a client has its answer (e.g. an HTTP request, counted once its
// response is written).
template <typename Pred>
Exposition WaitForMetrics(int port, double timeout_s, Pred done) {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    Exposition e = ScrapeMetrics(port);
    const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
    if (done(e) || waited.count() > timeout_s) return e;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_SUPPORT_METRICS_SCRAPE_H_
