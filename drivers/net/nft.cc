#include "drivers/net/nft.h"

#include <sys/stat.h>

#include <cerrno>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <utility>

#include "drivers/net/address_pool.h"
#include "drivers/net/libnftables.h"
#include "drivers/net/netns.h"

namespace safex::drivers::net {
namespace {

const char* Proto(plan::Protocol p) { return p == plan::Protocol::kUdp ? "udp" : "tcp"; }

std::mutex& NftMutex() {
  static std::mutex m;
  return m;
}

}  // namespace

std::string NeverReachableV4Elements(const std::string& pool_cidr) {
  // 100.100.100.200: Alibaba Cloud metadata. 169.254/16 covers AWS/GCP/Azure (169.254.169.254)
  // and ECS task metadata (169.254.170.2). 240/4 includes 255.255.255.255.
  return "0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 100.100.100.200, 224.0.0.0/4, 240.0.0.0/4, " +
         pool_cidr;
}

std::string RunNamespaceRuleset(const std::vector<EgressFlow>& flows,
                                const std::string& pool_cidr) {
  std::ostringstream o;
  o << "table inet " << kRunTable << " {\n"
    << "  counter " << kDeniedEgress << " { }\n"
    << "  counter " << kDeniedIngress << " { }\n"
    << "  set never_v4 {\n"
    << "    type ipv4_addr; flags interval; auto-merge;\n"
    << "    elements = { " << NeverReachableV4Elements(pool_cidr) << " }\n"
    << "  }\n"
    << "  chain sx_output {\n"
    << "    type filter hook output priority filter; policy drop;\n"
    << "    oifname \"lo\" accept\n"
    << "    ip daddr @never_v4 counter name \"" << kDeniedEgress << "\" drop\n";
  for (const EgressFlow& f : flows) {
    o << "    ip daddr " << Ipv4ToString(f.daddr) << " " << Proto(f.protocol) << " dport " << f.port
      << " accept\n";
  }
  o << "    counter name \"" << kDeniedEgress << "\" drop\n"
    << "  }\n"
    << "  chain sx_input {\n"
    << "    type filter hook input priority filter; policy drop;\n"
    << "    iifname \"lo\" accept\n"
    << "    ct state established,related accept\n"
    << "    counter name \"" << kDeniedIngress << "\" drop\n"
    << "  }\n"
    << "}\n";
  return o.str();
}

std::string UplinkRuleset(const std::string& table, const std::string& host_veth,
                          uint32_t sandbox_addr, const std::vector<EgressFlow>& flows,
                          const std::string& pool_cidr) {
  const std::string veth = "\"" + host_veth + "\"";
  const std::string src = Ipv4ToString(sandbox_addr);
  std::ostringstream o;
  o << "table inet " << table << " {\n"
    << "  counter " << kDeniedForward << " { }\n"
    << "  counter " << kDeniedHost << " { }\n"
    << "  counter " << kDeniedInbound << " { }\n"
    << "  set never_v4 {\n"
    << "    type ipv4_addr; flags interval; auto-merge;\n"
    << "    elements = { " << NeverReachableV4Elements(pool_cidr) << " }\n"
    << "  }\n"
    // Policy accept: this chain judges only packets to or from this run's veth; the host's other
    // traffic (and other runs, judged by their own tables) passes through untouched.
    << "  chain sx_forward {\n"
    << "    type filter hook forward priority filter; policy accept;\n"
    << "    iifname " << veth << " ip daddr @never_v4 counter name \"" << kDeniedForward
    << "\" drop\n";
  for (const EgressFlow& f : flows) {
    o << "    iifname " << veth << " ip saddr " << src << " ip daddr " << Ipv4ToString(f.daddr)
      << " " << Proto(f.protocol) << " dport " << f.port << " accept\n";
  }
  o << "    iifname " << veth << " counter name \"" << kDeniedForward << "\" drop\n"
    << "    oifname " << veth << " ct state established,related accept\n"
    << "    oifname " << veth << " counter name \"" << kDeniedInbound << "\" drop\n"
    << "  }\n"
    // Anything from the run addressed to the uplink namespace itself (its own addresses, the veth
    // gateway, services bound to them) never reaches a socket there.
    << "  chain sx_input {\n"
    << "    type filter hook input priority filter; policy accept;\n"
    << "    iifname " << veth << " counter name \"" << kDeniedHost << "\" drop\n"
    << "  }\n"
    << "  chain sx_postrouting {\n"
    << "    type nat hook postrouting priority srcnat; policy accept;\n"
    << "    ip saddr " << src << " oifname != " << veth << " masquerade\n"
    << "  }\n"
    << "}\n";
  return o.str();
}

namespace {

struct CtxFree {
  void operator()(nft_ctx* c) const { Nft().nft_ctx_free(c); }
};
using CtxPtr = std::unique_ptr<nft_ctx, CtxFree>;

// Creates a context whose netlink socket lives in netns_fd: it must be made on a thread inside.
Result<CtxPtr> NewContextIn(int netns_fd) {
  SAFEX_RETURN_IF_ERROR(LoadLibnftables());
  CtxPtr ctx;
  Status st = RunInNetns(netns_fd, [&]() -> Status {
    ctx.reset(Nft().nft_ctx_new(NFT_CTX_DEFAULT));
    if (!ctx) return Status::Unavailable("nft_ctx_new failed");
    if (Nft().nft_ctx_buffer_output(ctx.get()) != 0 || Nft().nft_ctx_buffer_error(ctx.get()) != 0) {
      return Status::Unavailable("nft_ctx_buffer_output failed");
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return ctx;
}

// REQUIRES: NftMutex held.
Result<std::string> RunWith(nft_ctx* ctx, const std::string& commands) {
  int rc = Nft().nft_run_cmd_from_buffer(ctx, commands.c_str());
  const char* out = Nft().nft_ctx_get_output_buffer(ctx);
  const char* err = Nft().nft_ctx_get_error_buffer(ctx);
  if (rc != 0) {
    std::string msg = err ? err : "";
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return Status::Unavailable("nftables: " + (msg.empty() ? std::string("command failed") : msg));
  }
  return std::string(out ? out : "");
}

std::map<std::pair<dev_t, ino_t>, CtxPtr>& SharedContexts() {
  static auto* m = new std::map<std::pair<dev_t, ino_t>, CtxPtr>();
  return *m;
}

}  // namespace

Result<std::string> NftRun(int netns_fd, const std::string& commands) {
  std::lock_guard<std::mutex> lock(NftMutex());
  SAFEX_ASSIGN_OR_RETURN(CtxPtr ctx, NewContextIn(netns_fd));
  return RunWith(ctx.get(), commands);
}

Result<std::string> NftRunShared(int netns_fd, const std::string& commands) {
  struct stat st;
  const int fd = netns_fd >= 0 ? netns_fd : -1;
  if (fd >= 0 ? ::fstat(fd, &st) != 0 : ::stat("/proc/thread-self/ns/net", &st) != 0) {
    return Status::Errno("fstat", "network namespace", errno);
  }
  std::lock_guard<std::mutex> lock(NftMutex());
  auto& m = SharedContexts();
  auto key = std::make_pair(st.st_dev, st.st_ino);
  auto it = m.find(key);
  if (it == m.end()) {
    SAFEX_ASSIGN_OR_RETURN(CtxPtr ctx, NewContextIn(netns_fd));
    it = m.emplace(key, std::move(ctx)).first;
  }
  // The context's socket is bound to its namespace; running it from this thread is fine (no
  // rule here uses interface indexes, which would be looked up in the caller's namespace).
  return RunWith(it->second.get(), commands);
}

void CloseSharedNftContexts() {
  std::lock_guard<std::mutex> lock(NftMutex());
  SharedContexts().clear();
}

std::map<std::string, uint64_t> ParseCounterPackets(const std::string& nft_output) {
  std::map<std::string, uint64_t> out;
  std::istringstream in(nft_output);
  std::string tok, current;
  while (in >> tok) {
    if (tok == "counter") {
      if (!(in >> current)) break;
    } else if (tok == "packets" && !current.empty()) {
      uint64_t n = 0;
      if (in >> n) out[current] = n;
      current.clear();
    }
  }
  return out;
}

}  // namespace safex::drivers::net
