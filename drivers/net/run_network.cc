#include "drivers/net/run_network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

#include "common/sha256.h"
#include "drivers/net/address_pool.h"
#include "drivers/net/netlink.h"
#include "drivers/net/netns.h"
#include "drivers/net/nft.h"

namespace safex::drivers::net {
namespace {

uint32_t V4(const plan::IpAddress& a) {
  return (uint32_t{a.bytes[0]} << 24) | (uint32_t{a.bytes[1]} << 16) | (uint32_t{a.bytes[2]} << 8) |
         a.bytes[3];
}

// Classes no rule may open, whatever the resolver step decided (defence in depth: the nft
// never_v4 set drops them too).
bool NeverReachable(plan::AddressClass c) {
  switch (c) {
    case plan::AddressClass::kLoopback:
    case plan::AddressClass::kLinkLocal:
    case plan::AddressClass::kMetadata:
    case plan::AddressClass::kMulticast:
    case plan::AddressClass::kUnspecified:
    case plan::AddressClass::kBroadcast:
    case plan::AddressClass::kReserved:
      return true;
    default:
      return false;
  }
}

constexpr int kLinkUpTimeoutMs = 2000;

const char* ProtoName(plan::Protocol p) { return p == plan::Protocol::kUdp ? "udp" : "tcp"; }

// Ensures forwarding is on in the uplink namespace (needed for replies to reach the run).
Status EnsureForwarding(int uplink_fd, bool manage) {
  return RunInNetns(uplink_fd, [&]() -> Status {
    const char* path = "/proc/sys/net/ipv4/ip_forward";
    SAFEX_ASSIGN_OR_RETURN(std::string v, ReadProcSys(path));
    if (v == "1") return Status::Ok();
    if (!manage) {
      return Status::FailedPrecondition(
          "net.ipv4.ip_forward is 0 in the uplink network namespace: runs with egress need it; "
          "enable it (sysctl -w net.ipv4.ip_forward=1) or set manage_ip_forward in the host "
          "config");
    }
    // Security: namespace-wide; in the host-uplink mode this turns the host into a router for
    // forwarded traffic. Every run's forward chain drops all but its granted flows; see
    // docs/network.md ("Host settings").
    return WriteProcSys(path, "1");
  });
}

// A record must name only what safex creates (a tampered record must not delete arbitrary
// interfaces, tables or files).
Status CheckRecordNames(const SlotRecord& r, const std::string& netns_dir) {
  if (!IsValidRunId(r.run_id) || r.host_veth != HostVethName(r.run_id) ||
      r.nft_table != UplinkTableName(r.run_id) ||
      r.netns_pin != netns_dir + "/" + NetnsPinName(r.run_id)) {
    return Status::DataLoss("network slot record does not match its run id \"" + r.run_id +
                            "\"; left alone");
  }
  return Status::Ok();
}

// Deletes an uplink table; absent is fine.
Status DeleteUplinkTable(int uplink_fd, const std::string& table) {
  auto r = NftRunShared(uplink_fd, "delete table inet " + table);
  if (r.ok()) return Status::Ok();
  auto list = NftRunShared(uplink_fd, "list tables inet");
  if (list.ok() && list->find("table inet " + table + "\n") == std::string::npos) {
    return Status::Ok();
  }
  return r.status().With("removing nftables table " + table);
}

// Removes the resources named by a record. Resources in a vanished uplink namespace went with it.
Status RemoveRecordResources(const SlotRecord& r) {
  Status first;
  auto keep = [&first](Status st) {
    if (!st.ok() && first.ok()) first = st;
  };
  auto uplink = OpenNetns(r.uplink_netns);
  if (uplink.ok()) {
    // The veth first: it must never exist without the table that judges its traffic.
    auto sk = RtnlSocket::OpenIn(uplink->get());
    if (sk.ok()) {
      keep(sk->DeleteLink(r.host_veth));
    } else {
      keep(sk.status());
    }
    keep(DeleteUplinkTable(uplink->get(), r.nft_table));
  } else if (r.uplink_netns.empty() || ::access(r.uplink_netns.c_str(), F_OK) == 0) {
    keep(uplink.status());
  }
  keep(RemoveNetnsPin(r.netns_pin));
  return first;
}

}  // namespace

std::string SandboxLink::AddressString() const { return Ipv4ToString(address); }
std::string SandboxLink::GatewayString() const { return Ipv4ToString(gateway); }

std::string RunShortId(const std::string& run_id) { return Sha256Hex(run_id).substr(0, 12); }
std::string HostVethName(const std::string& run_id) { return "sx" + RunShortId(run_id); }
std::string UplinkTableName(const std::string& run_id) { return "safex_" + RunShortId(run_id); }
std::string NetnsPinName(const std::string& run_id) { return "safex-" + run_id; }

Status ValidateNetworkConfig(const NetworkConfig& cfg) {
  auto cidr = plan::Cidr::Parse(cfg.pool_cidr);
  if (!cidr || cidr->base.family != AF_INET || cidr->prefix < 8 || cidr->prefix > 30) {
    return Status::InvalidArgument("network pool \"" + cfg.pool_cidr +
                                   "\" must be an IPv4 CIDR between /8 and /30 with zero host "
                                   "bits, e.g. 198.18.128.0/17");
  }
  auto abs = [](const std::string& p) { return !p.empty() && p[0] == '/'; };
  if (!abs(cfg.state_dir)) return Status::InvalidArgument("network state_dir must be absolute");
  if (!abs(cfg.netns_dir)) return Status::InvalidArgument("network netns_dir must be absolute");
  if (!cfg.uplink_netns.empty() && !abs(cfg.uplink_netns)) {
    return Status::InvalidArgument("uplink network namespace must be an absolute path or empty");
  }
  return Status::Ok();
}

namespace {

// The kernel resources of one run, movable as a whole so that their removal can be handed to a
// background thread. Removal order: the veth first (so that it never exists without the uplink
// rules that judge its traffic), then the uplink table, then the namespace pin, then the slot.
struct OwnedNetwork {
  std::string run_id;
  std::string pin;
  std::string veth;
  std::string table;
  SlotLease lease;
  UniqueFd uplink;
  UniqueFd netns;
  RtnlSocket uplink_rtnl;
  bool pin_created = false;
  bool table_created = false;
  bool veth_created = false;

  Status Remove() {
    Status first;
    auto keep = [&first](Status st) {
      if (!st.ok() && first.ok()) first = st;
    };
    netns.Reset();
    if (veth_created) keep(uplink_rtnl.DeleteLink(veth));
    if (table_created) keep(DeleteUplinkTable(uplink.get(), table));
    if (pin_created) keep(RemoveNetnsPin(pin));
    if (first.ok()) {
      keep(lease.Clear());
    } else {
      // Unlock but keep the record: what is left is the reconciler's (CleanupStale) or the next
      // owner's of this slot to remove.
      lease = SlotLease();
    }
    uplink.Reset();
    uplink_rtnl = RtnlSocket();
    veth_created = table_created = pin_created = false;
    return first.ok() ? first : first.With("tearing down the network of run " + run_id);
  }
};

// Background teardowns of this process: how many are running, and the first error.
struct Background {
  std::mutex mu;
  std::condition_variable cv;
  int pending = 0;
  Status first_error;
};
Background& Bg() {
  static auto* b = new Background();
  return *b;
}

}  // namespace

struct RunNetwork::State {
  std::string hosts;
  SandboxLink link;
  std::vector<EgressFlow> flows;
  OwnedNetwork own;
  bool torn_down = false;
  DeniedCounts final_counts;

  Result<DeniedCounts> Read() {
    DeniedCounts c;
    SAFEX_ASSIGN_OR_RETURN(
        std::string run_out,
        NftRun(own.netns.get(), std::string("list counters table inet ") + kRunTable));
    SAFEX_ASSIGN_OR_RETURN(std::string up_out,
                           NftRunShared(own.uplink.get(), "list counters table inet " + own.table));
    auto r = ParseCounterPackets(run_out);
    auto u = ParseCounterPackets(up_out);
    c.run_output = r[kDeniedEgress];
    c.run_input = r[kDeniedIngress];
    c.uplink_forward = u[kDeniedForward];
    c.uplink_host = u[kDeniedHost];
    c.uplink_inbound = u[kDeniedInbound];
    return c;
  }

  void ReadFinal() {
    if (own.table_created && own.netns) {
      auto c = Read();
      if (c.ok()) final_counts = *c;
    }
  }

  Status Teardown() {
    if (torn_down) return Status::Ok();
    ReadFinal();
    torn_down = true;
    return own.Remove();
  }

  void TeardownInBackground() {
    if (torn_down) return;
    ReadFinal();
    torn_down = true;
    // The namespace fd and pin go now (cheap); the veth deletion waits for RCU grace periods in
    // the kernel and runs on its own thread, which holds the address slot until it is done.
    Background& bg = Bg();
    {
      std::lock_guard<std::mutex> l(bg.mu);
      ++bg.pending;
    }
    auto finish = [](Status st) {
      Background& b = Bg();
      std::lock_guard<std::mutex> l(b.mu);
      if (!st.ok() && b.first_error.ok()) b.first_error = st;
      --b.pending;
      b.cv.notify_all();
    };
    auto work = std::make_shared<OwnedNetwork>(std::move(own));
    try {
      std::thread([work, finish] { finish(work->Remove()); }).detach();
    } catch (const std::system_error&) {
      finish(work->Remove());  // no thread to be had: remove synchronously instead
    }
  }
};

RunNetwork::RunNetwork(std::unique_ptr<State> s) : s_(std::move(s)) {}
RunNetwork::RunNetwork(RunNetwork&&) noexcept = default;
RunNetwork& RunNetwork::operator=(RunNetwork&& o) noexcept {
  if (this != &o) {
    if (s_) (void)s_->Teardown();
    s_ = std::move(o.s_);
  }
  return *this;
}
RunNetwork::~RunNetwork() {
  if (s_) (void)s_->Teardown();
}

int RunNetwork::netns_fd() const { return s_->own.netns.get(); }
const std::string& RunNetwork::netns_path() const { return s_->own.pin; }
const std::string& RunNetwork::hosts_file() const { return s_->hosts; }
const SandboxLink& RunNetwork::sandbox_link() const { return s_->link; }
const std::string& RunNetwork::host_veth() const { return s_->own.veth; }
const std::string& RunNetwork::nft_table() const { return s_->own.table; }

std::vector<std::string> RunNetwork::FlowStrings() const {
  std::vector<std::string> out;
  for (const EgressFlow& f : s_->flows) {
    out.push_back(Ipv4ToString(f.daddr) + ":" + std::to_string(f.port) + "/" +
                  ProtoName(f.protocol));
  }
  return out;
}

Result<DeniedCounts> RunNetwork::ReadDenied() {
  if (s_->torn_down) return s_->final_counts;
  return s_->Read();
}

uint64_t RunNetwork::DeniedCount() {
  auto c = ReadDenied();
  return c.ok() ? c->Egress() : 0;
}

Status RunNetwork::Teardown() { return s_ ? s_->Teardown() : Status::Ok(); }

namespace {

// From the run namespace's table as nftables lists it back: each accepted flow
// ("ip daddr 198.18.1.10 tcp dport 8080 accept" -> "198.18.1.10:8080/tcp", sorted) and the
// policy of each base chain ("drop, drop" for output and input).
void ParseRunRuleset(const std::string& listing, RunNetwork::ReadBack* r) {
  std::istringstream in(listing);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.size() == 7 && w[0] == "ip" && w[1] == "daddr" && w[3] != "@never_v4" &&
        w[4] == "dport" && w[6] == "accept") {
      r->accepted_flows.push_back(w[2] + ":" + w[5] + "/" + w[3]);
    }
    if (const size_t at = line.find("policy "); at != std::string::npos) {
      std::string policy = line.substr(at + 7);
      policy = policy.substr(0, policy.find(';'));
      r->chain_policies += (r->chain_policies.empty() ? "" : ", ") + policy;
    }
  }
  std::sort(r->accepted_flows.begin(), r->accepted_flows.end());
}

}  // namespace

Result<RunNetwork::ReadBack> RunNetwork::ReadBackFromKernel() {
  if (!s_) return Status::FailedPrecondition("no network");
  ReadBack r;
  SAFEX_ASSIGN_OR_RETURN(RtnlSocket inside, RtnlSocket::OpenIn(s_->own.netns.get()));
  SAFEX_ASSIGN_OR_RETURN(r.addresses, inside.Ipv4Addresses());
  r.expected_addresses = {
      s_->link.ifname + " " + s_->link.AddressString() + "/" + std::to_string(s_->link.prefix),
      "lo 127.0.0.1/8"};
  std::sort(r.expected_addresses.begin(), r.expected_addresses.end());
  SAFEX_ASSIGN_OR_RETURN(std::string run_rules,
                         NftRun(s_->own.netns.get(), std::string("list table inet ") + kRunTable));
  SAFEX_ASSIGN_OR_RETURN(std::string uplink_rules,
                         NftRunShared(s_->own.uplink.get(), "list table inet " + s_->own.table));
  r.expected_flows = FlowStrings();
  std::sort(r.expected_flows.begin(), r.expected_flows.end());
  ParseRunRuleset(run_rules, &r);
  r.run_ruleset_sha256 = Sha256Hex(run_rules);
  r.uplink_ruleset_sha256 = Sha256Hex(uplink_rules);
  return r;
}

void RunNetwork::TeardownInBackground() {
  if (s_) s_->TeardownInBackground();
}

Status WaitForBackgroundTeardowns() {
  Background& bg = Bg();
  std::unique_lock<std::mutex> l(bg.mu);
  bg.cv.wait(l, [&bg] { return bg.pending == 0; });
  return std::exchange(bg.first_error, Status());
}

namespace {

// Step 1 of Create: the flows the rulesets allow and the sandbox's hosts file, from the resolved
// egress; refuses, before anything exists, an address that is never reachable or is another run's.
Status PlanFlows(const std::vector<ResolvedEgress>& egress, const AddressPool& pool,
                 const std::string& pool_cidr, std::vector<EgressFlow>* flows, std::string* hosts) {
  *hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  std::vector<std::string> host_lines;
  for (const ResolvedEgress& e : egress) {
    const std::string where = "egress \"" + e.rule.host + ":" + std::to_string(e.rule.port) + "\"";
    if (e.rule.port == 0) return Status::InvalidArgument(where + ": port 0");
    bool any_v4 = false;
    for (const plan::IpAddress& a : e.addresses) {
      const plan::AddressClass c = plan::Classify(a);
      if (NeverReachable(c)) {
        return Status::PermissionDenied(where + ": " + a.ToString() + " (address class: " +
                                        plan::AddressClassName(c) + ") is never reachable");
      }
      if (a.family != AF_INET) continue;  // IPv4-only runs; see docs/network.md
      const uint32_t v4 = V4(a);
      if (pool.Contains(v4)) {
        return Status::PermissionDenied(where + ": " + a.ToString() +
                                        " is inside the run address pool " + pool_cidr +
                                        " (other runs are never reachable)");
      }
      any_v4 = true;
      EgressFlow f{v4, e.rule.port, e.rule.protocol};
      if (std::find(flows->begin(), flows->end(), f) == flows->end()) flows->push_back(f);
      if (!e.literal) {
        std::string line = a.ToString() + "\t" + e.rule.host + "\n";
        if (std::find(host_lines.begin(), host_lines.end(), line) == host_lines.end()) {
          host_lines.push_back(line);
        }
      }
    }
    if (!any_v4) {
      return Status::FailedPrecondition(where +
                                        ": no IPv4 address; IPv6 egress is not supported yet");
    }
  }
  if (!host_lines.empty()) *hosts += "# granted egress names, resolved by safex at run start\n";
  for (const std::string& l : host_lines) *hosts += l;
  return Status::Ok();
}

// Steps 4-6 of Create, once the slot is leased: the namespace, the rules (before the links, so
// that no packet crosses the veth before both rulesets are in place), then the veth pair, its
// addresses and routes. Each resource is marked in *own as soon as it exists (the caller tears
// down on failure).
Status BuildNamespaceAndLinks(const NetworkConfig& cfg, const std::string& run_id,
                              const SandboxLink& link, const std::vector<EgressFlow>& flows,
                              OwnedNetwork* own) {
  SAFEX_ASSIGN_OR_RETURN(own->netns, CreatePinnedNetns(cfg.netns_dir, NetnsPinName(run_id)));
  own->pin_created = true;

  SAFEX_RETURN_IF_ERROR(
      NftRun(own->netns.get(), RunNamespaceRuleset(flows, cfg.pool_cidr)).status());
  // `create` fails if the table exists: never merge our rules into someone else's table.
  SAFEX_RETURN_IF_ERROR(
      NftRunShared(own->uplink.get(),
                   "create table inet " + own->table + "\n" +
                       UplinkRuleset(own->table, own->veth, link.address, flows, cfg.pool_cidr))
          .status());
  own->table_created = true;

  SAFEX_ASSIGN_OR_RETURN(own->uplink_rtnl, RtnlSocket::OpenIn(own->uplink.get()));
  SAFEX_ASSIGN_OR_RETURN(RtnlSocket inside, RtnlSocket::OpenIn(own->netns.get()));
  SAFEX_RETURN_IF_ERROR(own->uplink_rtnl.CreateVethPair(own->veth, link.ifname, own->netns.get()));
  own->veth_created = true;

  SAFEX_ASSIGN_OR_RETURN(int host_idx, own->uplink_rtnl.LinkIndex(own->veth));
  SAFEX_RETURN_IF_ERROR(own->uplink_rtnl.AddIpv4Address(host_idx, link.gateway, link.prefix));
  SAFEX_RETURN_IF_ERROR(own->uplink_rtnl.SetLinkUp(host_idx));
  SAFEX_ASSIGN_OR_RETURN(int lo_idx, inside.LinkIndex("lo"));
  SAFEX_ASSIGN_OR_RETURN(int eth_idx, inside.LinkIndex(link.ifname));
  SAFEX_RETURN_IF_ERROR(inside.SetLinkUp(lo_idx));
  SAFEX_RETURN_IF_ERROR(inside.AddIpv4Address(eth_idx, link.address, link.prefix));
  SAFEX_RETURN_IF_ERROR(inside.SetLinkUp(eth_idx));
  SAFEX_RETURN_IF_ERROR(inside.AddDefaultRoute(link.gateway, eth_idx));
  // Ready means ready: the sandbox's first packet must not meet a link still coming up.
  SAFEX_RETURN_IF_ERROR(inside.WaitOperUp(eth_idx, kLinkUpTimeoutMs));
  return own->uplink_rtnl.WaitOperUp(host_idx, kLinkUpTimeoutMs);
}

}  // namespace

// In order: check and plan (nothing exists yet), the uplink, the leased slot whose record names
// every later resource before it exists (so a crash at any later point leaves nothing the
// reconciler cannot find), then the namespace, rules and links; any failure after the lease
// tears down what exists.
Result<RunNetwork> RunNetwork::Create(const NetworkConfig& cfg, const std::string& run_id,
                                      const std::vector<ResolvedEgress>& egress) {
  SAFEX_RETURN_IF_ERROR(ValidateNetworkConfig(cfg));
  if (!IsValidRunId(run_id)) {
    return Status::InvalidArgument("run id \"" + run_id + "\" must be 1..64 of [a-z0-9-]");
  }
  if (egress.empty()) {
    return Status::InvalidArgument(
        "a run without egress gets no network at all (--network=none), not a RunNetwork");
  }
  SAFEX_ASSIGN_OR_RETURN(AddressPool pool,
                         AddressPool::Open(cfg.pool_cidr, cfg.state_dir, cfg.max_slots));

  // 1. The flows and the hosts file, checked before anything is created.
  auto s = std::make_unique<State>();
  s->own.run_id = run_id;
  s->own.pin = cfg.netns_dir + "/" + NetnsPinName(run_id);
  s->own.veth = HostVethName(run_id);
  s->own.table = UplinkTableName(run_id);
  SAFEX_RETURN_IF_ERROR(PlanFlows(egress, pool, cfg.pool_cidr, &s->flows, &s->hosts));

  // 2. The uplink, and forwarding in it.
  SAFEX_ASSIGN_OR_RETURN(s->own.uplink, OpenNetns(cfg.uplink_netns));
  SAFEX_RETURN_IF_ERROR(EnsureForwarding(s->own.uplink.get(), cfg.manage_ip_forward));

  // 3. The address slot, its record naming every resource below.
  SlotRecord rec;
  rec.run_id = run_id;
  rec.pid = ::getpid();
  rec.netns_pin = s->own.pin;
  rec.uplink_netns = cfg.uplink_netns;
  rec.host_veth = s->own.veth;
  rec.nft_table = s->own.table;
  const std::string netns_dir = cfg.netns_dir;
  SAFEX_ASSIGN_OR_RETURN(s->own.lease, pool.Acquire(rec, [&netns_dir](const SlotRecord& stale) {
    SAFEX_RETURN_IF_ERROR(CheckRecordNames(stale, netns_dir));
    return RemoveRecordResources(stale);
  }));
  s->link.address = s->own.lease.sandbox();
  s->link.gateway = s->own.lease.gateway();
  s->link.prefix = SlotLease::kPrefix;

  // 4-6. The namespace, the rules, the links; from here on every failure tears down what exists.
  if (Status st = BuildNamespaceAndLinks(cfg, run_id, s->link, s->flows, &s->own); !st.ok()) {
    (void)s->Teardown();
    return st.With("setting up the network of the run");
  }
  return RunNetwork(std::move(s));
}

Status CleanupStale(const NetworkConfig& cfg, int* cleaned) {
  SAFEX_RETURN_IF_ERROR(ValidateNetworkConfig(cfg));
  SAFEX_ASSIGN_OR_RETURN(AddressPool pool,
                         AddressPool::Open(cfg.pool_cidr, cfg.state_dir, cfg.max_slots));
  const std::string netns_dir = cfg.netns_dir;
  return pool.CleanStale(
      [&netns_dir](const SlotRecord& stale) {
        SAFEX_RETURN_IF_ERROR(CheckRecordNames(stale, netns_dir));
        return RemoveRecordResources(stale);
      },
      cleaned);
}

}  // namespace safex::drivers::net
