// tmpfs.h — a tiny tmpfs for the tests that fill a filesystem up: mounted by the constructor
// (root or CAP_SYS_ADMIN; where mount is refused, refusal() says why, for GTEST_SKIP), unmounted
// by the destructor.
#pragma once

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "process.h"

namespace hs::test {

class Tmpfs {
 public:
  /// Mounts a tmpfs of `size` (mount's syntax: "2m") on the existing directory `dir`.
  Tmpfs(const std::string& dir, const std::string& size) : dir_(dir) {
    const std::string err = dir + ".mount.txt";
    const pid_t pid = spawn({"/bin/mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", dir}, {}, err, err);
    mounted_ = exited_ok(wait_for(pid, std::chrono::seconds(60)));
    std::ifstream in(err);
    std::stringstream text;
    text << in.rdbuf();
    refusal_ = "cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): " + text.str();
    std::remove(err.c_str());
  }
  ~Tmpfs() { unmount(); }
  Tmpfs(const Tmpfs&) = delete;
  Tmpfs& operator=(const Tmpfs&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& refusal() const { return refusal_; }
  /// Gives the mounted tmpfs a new size ("8m"), keeping its files: room made on a full disk.
  bool resize(const std::string& size) {
    if (!mounted_) return false;
    return exited_ok(
        wait_for(spawn({"/bin/mount", "-o", "remount,size=" + size, dir_}, {}), std::chrono::seconds(60)));
  }
  /// True when it was mounted and is no longer.
  bool unmount() {
    if (!mounted_) return false;
    mounted_ = false;
    return exited_ok(wait_for(spawn({"/bin/umount", dir_}, {}), std::chrono::seconds(60)));
  }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string refusal_;
};

}  // namespace hs::test
