#include "cli/interrupts.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <thread>
#include <vector>

namespace pb::cli {
namespace {

std::recursive_mutex& Mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

// Guarded by Mutex().
std::vector<std::string>& Temporaries() {
  static std::vector<std::string> paths;
  return paths;
}
std::vector<std::string>& Directories() {
  static std::vector<std::string> paths;
  return paths;
}

sigset_t InterruptSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  return set;
}

void Forget(std::vector<std::string>& paths, const std::string& path) {
  auto it = std::find(paths.begin(), paths.end(), path);
  if (it != paths.end()) paths.erase(it);
}

}  // namespace

void StartInterruptThread() {
  const sigset_t set = InterruptSignals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    while (::sigwait(&set, &sig) != 0) {
    }
    std::lock_guard<std::recursive_mutex> lock(Mutex());  // after the commit (or its roll-back) in progress
    for (const auto& path : Temporaries()) ::unlink(path.c_str());
    for (auto it = Directories().rbegin(); it != Directories().rend(); ++it) ::rmdir(it->c_str());
    ::_exit(128 + sig);
  }).detach();
}

std::unique_lock<std::recursive_mutex> CriticalSection() { return std::unique_lock<std::recursive_mutex>(Mutex()); }

void TrackTemporary(const std::string& path) {
  auto lock = CriticalSection();
  Temporaries().push_back(path);
}
void ForgetTemporary(const std::string& path) {
  auto lock = CriticalSection();
  Forget(Temporaries(), path);
}
void TrackCreatedDirectory(const std::string& path) {
  auto lock = CriticalSection();
  Directories().push_back(path);
}
void ForgetCreatedDirectory(const std::string& path) {
  auto lock = CriticalSection();
  Forget(Directories(), path);
}

}  // namespace pb::cli
