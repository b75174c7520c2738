// The daemon's control channel against a client that sends it nonsense
// (reliability.control_fuzz): one user's buggy program must not take the
// device down under the user's other programs. A client opens a context
// connection as the library does (its /proc/self/mem and access record
// along), learns which body size each request takes (the daemon answers
// any other size with EPROTO "malformed request body"), then sends REQUESTS
// requests of those sizes with random bodies - random bytes or zeros, with
// 32-bit fields now and then set to handles and numbers the daemon's
// replies held, to 0 or to small numbers - and now and then a descriptor
// along (a memfd of a page or of none, /dev/null, an eventfd, its own
// socket). Every request
// must be answered within 5 s on the same connection, and every few hundred
// a second client must get `status` answered. Every op but kShutdown and
// kHello is sent.
//
//   control_fuzz REQUESTS SEED   (SOFTVERBS_RUNTIME_DIR names the daemon)
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/runtime_dir.h"
#include "protocol/messages.h"
#include "raw_daemon_channel.h"

namespace {

using namespace softverbs;
using namespace softverbs::test;
using protocol::Op;

constexpr size_t kMaxProbedBody = 1024;
const char kMalformed[] = "malformed request body";

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: control_fuzz REQUESTS SEED\n");
    return 2;
  }
  const long requests = atol(argv[1]);
  std::mt19937_64 rng(strtoull(argv[2], nullptr, 10));
  const char* dir = getenv("SOFTVERBS_RUNTIME_DIR");
  if (!dir) Die("SOFTVERBS_RUNTIME_DIR is not set");
  const std::string path = DaemonSocketPath(dir);
  Channel ctx(path);
  GreetAsContext(ctx);

  // The body size each op takes.
  std::map<uint16_t, std::vector<size_t>> sizes;
  std::vector<uint8_t> zeros(kMaxProbedBody, 0);
  for (uint16_t op = 2; op < static_cast<uint16_t>(Op::kCount); ++op) {
    if (op == static_cast<uint16_t>(Op::kShutdown)) continue;
    for (size_t len = 0; len <= kMaxProbedBody; len += 4) {
      Answer a = ctx.Call(op, zeros.data(), len);
      if (a.err != EPROTO || a.reason != kMalformed) sizes[op].push_back(len);
    }
  }
  if (sizes.size() < 40) Die("fewer than 40 ops take any body size: the probe is broken");

  // Values worth putting in a field: what replies held (handles, keys,
  // numbers), and edge values.
  std::vector<uint32_t> dictionary = {0, 1, 2, 3, 4, 7, 8, 64, 4096, 0xffffffffu, 0x80000000u};
  std::vector<uint16_t> ops;
  for (const auto& [op, s] : sizes) ops.push_back(op);
  std::map<int, long> errors;
  std::map<uint16_t, long> ok_by_op;
  long ok = 0;
  std::vector<uint8_t> body(kMaxProbedBody);
  for (long i = 0; i < requests; ++i) {
    const uint16_t op = ops[rng() % ops.size()];
    const std::vector<size_t>& s = sizes[op];
    const size_t len = s[rng() % s.size()];
    // Half random bytes with a third of the words from the dictionary;
    // half zeros (no flags: more requests get past the first checks) with
    // a few words from it.
    const bool noise = rng() % 2;
    for (size_t k = 0; k < len; ++k) body[k] = noise ? static_cast<uint8_t>(rng()) : 0;
    for (size_t k = 0; k + 4 <= len; k += 4) {
      if (noise ? rng() % 3 == 0 : rng() % 8 == 0) {
        const uint32_t v = dictionary[rng() % dictionary.size()];
        memcpy(&body[k], &v, 4);
      }
    }
    // Now and then a descriptor along, of a kind a request may carry.
    int fd = -1;
    switch (rng() % 16) {
      case 0:
        fd = memfd_create("control-fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd >= 0 && rng() % 2) (void)!ftruncate(fd, 4096);
        break;
      case 1:
        fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        break;
      case 2:
        fd = eventfd(0, EFD_CLOEXEC);
        break;
      case 3:
        fd = dup(ctx.fd());
        break;
      default:
        break;
    }
    Answer a = ctx.Call(op, body.data(), len, fd >= 0 ? &fd : nullptr, fd >= 0 ? 1 : 0);
    if (fd >= 0) close(fd);
    if (a.err == 0) {
      ok++;
      ok_by_op[op]++;
      for (size_t k = 0; k + 4 <= a.body.size() && dictionary.size() < 4096; k += 4) {
        uint32_t v;
        memcpy(&v, &a.body[k], 4);
        if (v != 0) dictionary.push_back(v);
      }
    } else {
      errors[a.err]++;
    }
    if (i % 500 == 0) {  // another client is still served
      Channel cli(path);
      GreetAsCli(cli);
      if (cli.Call(static_cast<uint16_t>(Op::kStatus), nullptr, 0).err) Die("status failed");
    }
  }
  printf("%zu ops take a body; %ld requests: %ld succeeded, errors", ops.size(), requests, ok);
  for (const auto& [e, n] : errors)
    printf(" %s %ld", strerrorname_np(e) ? strerrorname_np(e) : "?", n);
  printf("\nsucceeded at least once (%zu ops):", ok_by_op.size());
  for (const auto& [op, n] : ok_by_op) printf(" %s", protocol::OpName(static_cast<Op>(op)));
  printf("\n");
  return 0;
}
