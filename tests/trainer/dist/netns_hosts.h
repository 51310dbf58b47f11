// netns_hosts.h — two "hosts" on this machine for the multi-host and network-fault tests: network
// namespaces joined by a veth pair, each with its own address and (through `unshare --uts`) its own
// host name, made by the test and deleted after it. All their traffic stays on the pair. Needs
// root and iproute2 (`ip`, `tc` with netem); unavailable() says why not where they are missing.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace hs::test {

class NetnsHosts {
 public:
  static constexpr int kHosts = 2;

  /// Empty when the hosts can be made here, else the reason (printed by the skipping test).
  static std::string unavailable() {
    if (::geteuid() != 0) return "the network-namespace hosts need root (ip netns add)";
    if (std::system("command -v ip >/dev/null && command -v tc >/dev/null && command -v unshare >/dev/null") != 0)
      return "iproute2 (ip, tc) or util-linux (unshare) missing: scripts/install-deps.sh installs them";
    return "";
  }

  NetnsHosts() : tag_(fmt::format("hs{}", ::getpid() % 100000)) {
    for (int h = 0; h < kHosts; ++h) run(fmt::format("ip netns add {}", ns(h)));
    run(fmt::format("ip link add {} netns {} type veth peer name {} netns {}", dev(0), ns(0), dev(1), ns(1)));
    for (int h = 0; h < kHosts; ++h) {
      run(fmt::format("ip -n {} addr add {}/24 dev {}", ns(h), addr(h), dev(h)));
      run(fmt::format("ip -n {} link set {} up", ns(h), dev(h)));
      run(fmt::format("ip -n {} link set lo up", ns(h)));
    }
    ok_ = failures_ == 0;
  }
  ~NetnsHosts() {
    for (int h = 0; h < kHosts; ++h) std::system(fmt::format("ip netns del {} 2>/dev/null", ns(h)).c_str());
  }
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  bool ok() const { return ok_; }
  std::string ns(int h) const { return fmt::format("{}h{}", tag_, h); }
  std::string dev(int h) const { return fmt::format("{}v{}", tag_, h); }
  std::string addr(int h) const { return fmt::format("10.233.7.{}", h + 1); }
  std::string host_name(int h) const { return fmt::format("host-{}", static_cast<char>('a' + h)); }

  /// `argv` run on host h: in its namespace, with its own host name.
  std::vector<std::string> on_host(int h, const std::vector<std::string>& argv) const {
    std::vector<std::string> out = {"/usr/bin/env", "ip", "netns", "exec", ns(h), "unshare", "--uts", "sh", "-c",
                                    "hostname \"$0\" && exec \"$@\"", host_name(h)};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

  /// Host h's egress limited to `rate_kbit` by a token bucket (tc tbf) with a queue of `queue_bytes`:
  /// every byte takes 8/rate seconds on the wire, and what overflows the queue is dropped (TCP
  /// retransmits it). tbf rather than netem: the kernels of these machines have no sch_netem
  /// (tc answers "Specified qdisc kind is unknown"), nor classifiers or actions.
  bool limit_rate(int h, int rate_kbit, int burst_bytes, int queue_bytes) const {
    return std::system(fmt::format("ip netns exec {} tc qdisc replace dev {} root tbf rate {}kbit burst {} limit {}",
                                   ns(h), dev(h), rate_kbit, burst_bytes, queue_bytes)
                           .c_str()) == 0;
  }
  /// Packets host h's link dropped so far (tc -s), or -1 when unreadable.
  long long dropped(int h) const {
    const std::string cmd = fmt::format("ip netns exec {} tc -s qdisc show dev {} | sed -n 's/.*dropped \\([0-9]*\\).*/\\1/p'",
                                        ns(h), dev(h));
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return -1;
    long long n = -1;
    if (std::fscanf(p, "%lld", &n) != 1) n = -1;
    ::pclose(p);
    return n;
  }
  /// The cable pulled: the pair's link down on both sides, every packet between the hosts lost.
  bool partition() const {
    bool ok = true;
    for (int h = 0; h < kHosts; ++h)
      ok &= std::system(fmt::format("ip -n {} link set {} down", ns(h), dev(h)).c_str()) == 0;
    return ok;
  }

 private:
  void run(const std::string& cmd) {
    if (std::system(cmd.c_str()) != 0) ++failures_;
  }

  std::string tag_;
  int failures_ = 0;
  bool ok_ = false;
};

}  // namespace hs::test
