// A test's scratch directory that goes away with it: every test and test helper that needs
// files on disk (configs, logs, sockets, kubeconfigs, throwaway private keys) makes them in a
// TempDir, which removes them when the test ends, passed or failed.
#ifndef FITLEDGER_TESTS_COMMON_TEMP_DIR_H_
#define FITLEDGER_TESTS_COMMON_TEMP_DIR_H_

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace fitledger::testing {

// A fresh directory $TEST_TMPDIR/fitledger-<prefix>-XXXXXX ($TEST_TMPDIR unset or empty:
// /tmp), removed with everything in it on destruction (or when another TempDir is moved into
// it). Throws std::system_error if it cannot be made (gtest reports that as the test's
// failure). Movable, not copyable; a default-constructed or moved-from TempDir owns nothing.
class TempDir {
 public:
  TempDir() = default;
  explicit TempDir(std::string_view prefix) {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
                       "/fitledger-" + std::string(prefix) + "-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + tmpl);
    }
    path_ = std::move(tmpl);
  }
  ~TempDir() { Remove(); }
  TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, std::string())) {}
  TempDir& operator=(TempDir&& other) noexcept {
    if (this != &other) {
      Remove();
      path_ = std::exchange(other.path_, std::string());
    }
    return *this;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The directory ("" if this owns none).
  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string File(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  void Remove() noexcept {
    if (path_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
    path_.clear();
  }

  std::string path_;
};

}  // namespace fitledger::testing

#endif  // FITLEDGER_TESTS_COMMON_TEMP_DIR_H_
