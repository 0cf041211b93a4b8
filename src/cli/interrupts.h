// SIGINT, SIGTERM and SIGHUP in the native CLI. They are blocked in every thread from the start of main() and taken
// by one thread that waits for them (sigwait): it removes the temporary files of the outputs being written and the
// output directory the command created (if it is still empty), then exits with 128 + the signal. It does so under
// the lock of CriticalSection, so a commit in progress (renames, moves aside) finishes or rolls back first: an
// interrupted command leaves either the old output or the new one, never a mix and never a temporary file.
#pragma once

#include <mutex>
#include <string>

namespace pb::cli {

// Blocks the three signals in the calling thread (and so in every thread it starts later) and starts the thread
// that takes them. Called once, first thing in main(). Without it (the tests' own binaries) signals act as usual.
void StartInterruptThread();

// Held while the files on disk must not be left half-changed: creating and registering a temporary file, a commit,
// the completion of an interrupted commit. Re-entrant.
std::unique_lock<std::recursive_mutex> CriticalSection();

// A temporary file removed if the command is interrupted, until forgotten (renamed into place, or removed).
void TrackTemporary(const std::string& path);
void ForgetTemporary(const std::string& path);
// A directory the command created for its output, removed (if still empty) if the command is interrupted.
void TrackCreatedDirectory(const std::string& path);
void ForgetCreatedDirectory(const std::string& path);

}  // namespace pb::cli
