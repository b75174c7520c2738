// Only a connection that passed a memfd may name it (docs/security.md):
// since protocol 16 the device keeps a registration's memfd for the
// connection that passed it, and a later registration on that connection
// names it by (st_dev, st_ino) instead of passing it again. Another
// connection naming it - a buggy or hostile client, which could otherwise
// have an MR of its own backed by another process's pages - is answered
// ESTALE and no MR is made; once it passed the memfd itself, it may.
//
// A context opened through the library registers a range (its memfd is
// kept for it); a second, raw connection of this process
// (raw_daemon_channel.h) then names that memfd.
//
//   kept_backing_names   (SOFTVERBS_RUNTIME_DIR names the daemon)
#include <infiniband/verbs.h>
#include <sys/stat.h>

#include <string>

#include "common/runtime_dir.h"
#include "mapped_file.h"
#include "raw_daemon_channel.h"

namespace {

using namespace softverbs;
using namespace softverbs::test;

protocol::RegMrBackedRequest Registration(protocol::Handle pd, char* p, size_t len) {
  protocol::RegMrBackedRequest req{};
  const uint64_t addr = reinterpret_cast<uint64_t>(p);
  req.reg = {pd, IBV_ACCESS_LOCAL_WRITE, addr, len, addr};
  req.backed_begin = addr;
  req.backed_end = addr + len;
  return req;
}

size_t MrCount(Channel& cli) {
  Answer a = cli.Call(static_cast<uint16_t>(Op::kStatus), nullptr, 0);
  RAW_CHECK(a.err == 0);
  // The device-wide count, in "objects" (each client's own "mr" is a list).
  const std::string json(a.body.begin(), a.body.end());
  const size_t objects = json.find("\"objects\"");
  RAW_CHECK(objects != std::string::npos);
  const size_t at = json.find("\"mr\":", objects);
  RAW_CHECK(at != std::string::npos);
  char* end = nullptr;
  const unsigned long count = strtoul(json.c_str() + at + 5, &end, 10);
  RAW_CHECK(end != json.c_str() + at + 5);
  return count;
}

}  // namespace

int main() {
  const char* dir = getenv("SOFTVERBS_RUNTIME_DIR");
  if (!dir) Die("SOFTVERBS_RUNTIME_DIR is not set");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // The library's context: a registered range, its memfd kept for it.
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  RAW_CHECK(list && n > 0);
  ibv_context* ctx = ibv_open_device(list[0]);
  RAW_CHECK(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  RAW_CHECK(pd);
  auto* p = static_cast<char*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  RAW_CHECK(p != MAP_FAILED);
  memset(p, 'k', 2 * page);
  ibv_mr* mr = ibv_reg_mr(pd, p, 2 * page, IBV_ACCESS_LOCAL_WRITE);
  RAW_CHECK(mr);
  RAW_CHECK(ibv_dereg_mr(mr) == 0);  // kept for the context all the same
  const int memfd = DescriptorOfInode(MappedInode(p));
  RAW_CHECK(memfd >= 0);
  struct stat st {};
  RAW_CHECK(fstat(memfd, &st) == 0);
  const protocol::BackingName name{st.st_dev, st.st_ino};

  // A connection of its own names it.
  const std::string path = DaemonSocketPath(dir);
  Channel raw(path);
  GreetAsContext(raw);
  Channel cli(path);
  GreetAsCli(cli);
  Answer a = raw.Call(static_cast<uint16_t>(Op::kAllocPd), nullptr, 0);
  RAW_CHECK(a.err == 0 && a.body.size() >= sizeof(protocol::AllocPdReply));
  protocol::AllocPdReply raw_pd;
  memcpy(&raw_pd, a.body.data(), sizeof(raw_pd));
  const size_t mrs = MrCount(cli);
  protocol::RegMrBackedRequest req = Registration(raw_pd.handle, p, 2 * page);
  req.backing_kind = protocol::kBackingMemfdKept;
  req.kept = name;
  a = raw.Call(static_cast<uint16_t>(Op::kRegMrBacked), &req, sizeof(req));
  if (a.err != ESTALE) {
    Die("FAIL: naming another connection's memfd: " + std::string(strerror(a.err)) +
        ", expected ESTALE");
  }
  RAW_CHECK(MrCount(cli) == mrs);  // no MR made
  // A name nobody passed: the same.
  req.kept = {name.dev, name.ino + 1000003};
  RAW_CHECK(raw.Call(static_cast<uint16_t>(Op::kRegMrBacked), &req, sizeof(req)).err == ESTALE);
  RAW_CHECK(MrCount(cli) == mrs);

  // Passed over this connection, the memfd is kept for it too, and then
  // it may name it.
  req.backing_kind = protocol::kBackingNone;
  req.kept = {};
  a = raw.Call(static_cast<uint16_t>(Op::kRegMrBacked), &req, sizeof(req), &memfd, 1);
  RAW_CHECK(a.err == 0 && a.body.size() >= sizeof(protocol::RegMrReply));
  protocol::RegMrReply rep;
  memcpy(&rep, a.body.data(), sizeof(rep));
  RAW_CHECK(rep.flags & protocol::kRegMrBackingKept);
  req.backing_kind = protocol::kBackingMemfdKept;
  req.kept = name;
  RAW_CHECK(raw.Call(static_cast<uint16_t>(Op::kRegMrBacked), &req, sizeof(req)).err == 0);
  RAW_CHECK(MrCount(cli) == mrs + 2);
  printf(
      "kept_backing_names: ESTALE for another connection's memfd and for an unknown name; "
      "named after passing it: ok\n");
  return 0;
}
