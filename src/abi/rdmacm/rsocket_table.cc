// The rsocket descriptor table: descriptor -> Rsocket. A descriptor is the
// fd of the socket's private rdma_cm event channel, so it never collides
// with another open file of the process.
#include <errno.h>

#include <mutex>
#include <unordered_map>

#include "abi/ibverbs/reject.h"
#include "abi/rdmacm/rsocket_internal.h"

namespace softverbs::rdmacm::rs {
namespace {

std::mutex table_mutex;
std::unordered_map<int, Rsocket*>& Table() {
  static auto* table = new std::unordered_map<int, Rsocket*>;  // outlives every caller
  return *table;
}

}  // namespace

void InsertSocket(Rsocket* rs) {
  std::lock_guard lock(table_mutex);
  Table()[rs->fd] = rs;
}

void RemoveSocket(Rsocket* rs) {
  std::lock_guard lock(table_mutex);
  auto it = Table().find(rs->fd);
  if (it != Table().end() && it->second == rs) Table().erase(it);
}

Rsocket* FindSocket(int fd) {
  std::lock_guard lock(table_mutex);
  auto it = Table().find(fd);
  return it == Table().end() ? nullptr : it->second;
}

Rsocket* LookupSocket(int fd, const char* verb) {
  Rsocket* rs = FindSocket(fd);
  if (!rs) abi::RejectMinusOne(EBADF, "%s: %d is not an rsocket", verb, fd);
  return rs;
}

}  // namespace softverbs::rdmacm::rs
