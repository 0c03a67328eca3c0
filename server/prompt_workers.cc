#include "server/prompt_workers.h"

#include <utility>

namespace textgen::server {

PromptWorkers::PromptWorkers(int threads, int max_pending) : max_pending_(max_pending) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Run(); });
}

PromptWorkers::~PromptWorkers() { Stop(); }

bool PromptWorkers::TryPost(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || static_cast<int>(tasks_.size()) >= max_pending_) return false;
  tasks_.push_back(std::move(task));
  return true;
}

void PromptWorkers::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void PromptWorkers::Run() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !tasks_.empty(); };
      mu_.Await(absl::Condition(&ready));
      // Stopping still runs what was accepted: each task owes its caller an answer.
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace textgen::server
