// The connection manager's port table: which id holds which (port space,
// address, port), ephemeral ports, EADDRINUSE, and the listener a request
// reaches.
#include <errno.h>

#include <random>

#include "daemon/cm_service.h"

namespace softverbs::daemon {

namespace {

// The kernel's default ip_local_port_range.
constexpr uint16_t kEphemeralFirst = 32768;
constexpr uint16_t kEphemeralLast = 60999;

// Whether a bound address covers b's: the same IP, or a wildcard or loopback
// address of the same family (IsAnyAddress), or an IPv6 one without AFONLY
// (it takes IPv4 too).
bool Covers(const CmAddr& a, uint32_t a_flags, const CmAddr& b) {
  if (IsAnyAddress(a)) {
    if (FamilyOf(a) == FamilyOf(b)) return true;
    return FamilyOf(a) == AF_INET6 && !(a_flags & protocol::kCmAfOnly);
  }
  return SameIp(a, b);
}

}  // namespace

bool CmService::Overlaps(const Id& a, const Id& b) const {
  if (a.port_space != b.port_space || PortOf(a.route.src) != PortOf(b.route.src)) return false;
  return Covers(a.route.src, a.flags, b.route.src) || Covers(b.route.src, b.flags, a.route.src);
}

Verdict CmService::ReservePort(Id& id, CmAddr addr, uint32_t flags) {
  Id probe = id;
  probe.flags = flags;
  auto conflict = [&](uint16_t port) -> const Id* {
    probe.route.src = addr;
    SetPort(&probe.route.src, port);
    for (auto& [h, other] : ids_) {
      if (h == id.handle || !other.holds_port || !Overlaps(probe, other)) continue;
      // SO_REUSEADDR semantics of rdma_cm: both ask for it and neither listens.
      const bool reuse = (flags & protocol::kCmReuseAddr) &&
                         (other.flags & protocol::kCmReuseAddr) && other.state != CmState::kListen;
      if (!reuse) return &other;
    }
    return nullptr;
  };
  uint16_t port = PortOf(addr);
  if (port == 0) {
    static std::mt19937 rng{std::random_device{}()};
    const uint32_t span = kEphemeralLast - kEphemeralFirst + 1;
    uint32_t start = rng() % span;
    bool found = false;
    for (uint32_t i = 0; i < span && !found; ++i) {
      uint16_t candidate = static_cast<uint16_t>(kEphemeralFirst + (start + i) % span);
      if (!conflict(candidate)) {
        port = candidate;
        found = true;
      }
    }
    if (!found) {
      return Verdict::Fail(
          EADDRINUSE, "no ephemeral port is free in port space " + std::to_string(id.port_space));
    }
  } else if (const Id* other = conflict(port)) {
    return Verdict::Fail(EADDRINUSE, FormatAddr(addr) + " is in use (id " +
                                         std::to_string(other->handle) + ", state " +
                                         CmStateName(other->state) + ")");
  }
  SetPort(&addr, port);
  id.route.src = addr;
  id.holds_port = true;
  return Verdict::Ok();
}

CmService::Id* CmService::FindListener(uint32_t port_space, const CmAddr& dst) {
  Id* wildcard = nullptr;
  for (auto& [h, id] : ids_) {
    if (id.state != CmState::kListen || id.port_space != port_space ||
        PortOf(id.route.src) != PortOf(dst) || !Covers(id.route.src, id.flags, dst)) {
      continue;
    }
    if (!IsAnyAddress(id.route.src)) return &id;  // the most specific listener wins
    if (!wildcard) wildcard = &id;
  }
  return wildcard;
}

}  // namespace softverbs::daemon
