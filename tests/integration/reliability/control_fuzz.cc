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
// a second client must get `status` answered. Every op but kShutdown,
// kHello, kCallDoorbell and kOfferBacking (which have no reply) is sent;
// offers go along at random (a sealed or unsealed memfd, /dev/null, an
// eventfd, none or two, a body or none), answered by nothing.
//
// Then the same through the connection's call page (protocol/call_page.h),
// mixed with pages written as no library would: a size past the request
// area or shorter than a header, a header whose seq, version or size is not
// the published one (each answered EPROTO through the page), a request torn
// (its begin word not its seq: never served; the next one is), doorbells
// with nothing new, the library's sleeping word set at random; a request
// with a descriptor goes over the socket asking for its reply through the
// page. Each
// well-formed one must be answered within 5 s, and `status` must count the
// page's requests.
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
#include <time.h>
#include <unistd.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/runtime_dir.h"
#include "protocol/call_page.h"
#include "protocol/messages.h"
#include "raw_daemon_channel.h"

namespace {

using namespace softverbs;
using namespace softverbs::test;
using protocol::Op;

constexpr size_t kMaxProbedBody = 1024;
const char kMalformed[] = "malformed request body";

double NowS() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

// A memfd offered ahead of a registration (no reply), or something else
// dressed as one.
void SendOffer(Channel& c, std::mt19937_64& rng) {
  const uint32_t body_len = rng() % 3 == 0 ? 8 : 0;
  const protocol::RequestHeader h{protocol::kProtocolVersion,
                                  static_cast<uint16_t>(Op::kOfferBacking), 0, body_len,
                                  static_cast<uint32_t>(rng())};
  const uint64_t body = rng();
  int fds[2] = {-1, -1};
  size_t nfds = 1;
  switch (rng() % 6) {
    case 0:  // as the library makes them
      fds[0] = memfd_create("control-fuzz-offer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
      if (fds[0] >= 0 && (ftruncate(fds[0], 4096) != 0 ||
                          fcntl(fds[0], F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)) {
        Die("a sealed memfd for an offer");
      }
      break;
    case 1:  // not sealed
      fds[0] = memfd_create("control-fuzz-offer", MFD_CLOEXEC);
      break;
    case 2:
      fds[0] = open("/dev/null", O_RDWR | O_CLOEXEC);
      break;
    case 3:
      fds[0] = eventfd(0, EFD_CLOEXEC);
      break;
    case 4:  // two
      fds[0] = memfd_create("control-fuzz-offer", MFD_CLOEXEC);
      fds[1] = dup(fds[0]);
      nfds = 2;
      break;
    default:  // none
      nfds = 0;
      break;
  }
  if (int e = SendMessage(c.fd(), &h, sizeof(h), &body, body_len, fds, nfds)) {
    Die(std::string("the daemon closed the connection at an offer: ") + strerror(e));
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

void RingDoorbell(Channel& c, uint32_t seq) {
  const protocol::RequestHeader bell{protocol::kProtocolVersion,
                                     static_cast<uint16_t>(Op::kCallDoorbell), 0, 0, seq};
  if (int e = SendMessage(c.fd(), &bell, sizeof(bell), nullptr, 0)) {
    Die(std::string("the daemon closed the connection at a doorbell: ") + strerror(e));
  }
}

// Waits (5 s at most) for the page's reply to seq and reads it, from the
// page or, when the page says so, from the socket.
Answer PageReply(Channel& c, protocol::CallPage* page, uint16_t op, uint32_t seq) {
  const double until = NowS() + 5;
  while (page->reply_seq.load(std::memory_order_acquire) != seq) {
    if (NowS() > until) {
      Die(std::string("no reply in 5 s through the call page to op ") +
          protocol::OpName(static_cast<Op>(op)));
    }
    usleep(20);
  }
  if (page->reply_on_socket.load()) return c.Receive(op, seq);
  const size_t n = std::min<size_t>(page->reply_size.load(), protocol::kCallPageReplyBytes);
  RAW_CHECK(n >= sizeof(protocol::ReplyHeader));
  protocol::ReplyHeader r;
  memcpy(&r, page->reply, sizeof(r));
  RAW_CHECK(r.seq == seq);
  Answer a;
  a.err = r.err;
  const size_t body_end = std::min<size_t>(n, sizeof(r) + r.body_size);
  a.body.assign(page->reply + sizeof(r), page->reply + body_end);
  a.reason.assign(reinterpret_cast<char*>(page->reply) + body_end,
                  std::min<size_t>(r.reason_len, n - body_end));
  return a;
}

// One request through the page, rung as the library rings it.
Answer PageCall(Channel& c, protocol::CallPage* page, uint16_t op, const void* body, size_t len) {
  const uint32_t seq = c.NextSeq();
  const protocol::RequestHeader h{protocol::kProtocolVersion, op, 0, static_cast<uint32_t>(len),
                                  seq};
  protocol::PublishRequest(page, seq, h, body, len);
  if (!page->daemon_watching.load()) RingDoorbell(c, seq);
  return PageReply(c, page, op, seq);
}

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
  std::vector<int> hello_fds;
  GreetAsContext(ctx, &hello_fds);
  RAW_CHECK(hello_fds.size() == 2);  // the device table and the call page
  void* page_map =
      mmap(nullptr, protocol::kCallPageSize, PROT_READ | PROT_WRITE, MAP_SHARED, hello_fds[1], 0);
  RAW_CHECK(page_map != MAP_FAILED);
  auto* page = static_cast<protocol::CallPage*>(page_map);
  for (int f : hello_fds) close(f);

  // The body size each op takes.
  std::map<uint16_t, std::vector<size_t>> sizes;
  std::vector<uint8_t> zeros(kMaxProbedBody, 0);
  for (uint16_t op = 2; op < static_cast<uint16_t>(Op::kCount); ++op) {
    if (op == static_cast<uint16_t>(Op::kShutdown)) continue;
    if (op == static_cast<uint16_t>(Op::kCallDoorbell)) continue;
    if (op == static_cast<uint16_t>(Op::kOfferBacking)) continue;
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
  long page_calls = 0, page_refusals = 0, torn = 0, socket_to_page = 0, offers = 0;
  for (long i = 0; i < 2 * requests; ++i) {
    // The first half over the socket, the second through the call page.
    const bool by_page = i >= requests;
    if (rng() % 32 == 0) {
      SendOffer(ctx, rng);
      ++offers;
      continue;
    }
    if (by_page) {
      const uint32_t odd = rng() % 16;
      if (odd == 0) {  // torn: never served, so never answered
        const uint32_t seq = ctx.NextSeq();
        page->request_seq.store(seq);
        page->request_begin.store(seq + 1 + rng() % 1000);
        RingDoorbell(ctx, seq);
        ++torn;
        continue;
      }
      if (odd == 1) {  // a doorbell with nothing new, and the sleeping word at random
        RingDoorbell(ctx, ctx.NextSeq());
        page->client_sleeping.store(rng() % 3);
        continue;
      }
      if (odd == 2) {  // malformed: each answered EPROTO through the page
        const uint32_t seq = ctx.NextSeq();
        protocol::RequestHeader h{protocol::kProtocolVersion, static_cast<uint16_t>(Op::kAllocPd),
                                  0, 0, seq};
        uint32_t size = sizeof(h);
        switch (rng() % 5) {
          case 0:
            h.seq = seq + 1;
            break;
          case 1:
            h.version = protocol::kProtocolVersion + 1;
            break;
          case 2:
            h.body_size = 8;
            break;
          case 3:
            size = rng() % sizeof(h);
            break;
          default:
            size = protocol::kCallPageRequestBytes + 1 + rng() % 100000;
            break;
        }
        page->request_begin.store(seq);
        memcpy(page->request, &h, sizeof(h));
        page->request_size.store(size);
        page->request_seq.store(seq);
        if (!page->daemon_watching.load()) RingDoorbell(ctx, seq);
        Answer a = PageReply(ctx, page, h.op, seq);
        if (a.err != EPROTO) Die("a malformed page request got " + std::to_string(a.err));
        ++page_refusals;
        continue;
      }
    }
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
    Answer a;
    if (by_page && fd >= 0) {
      // A descriptor goes over the socket, its reply comes through the page.
      const uint32_t seq = ctx.NextSeq();
      protocol::RequestHeader h{protocol::kProtocolVersion, op, protocol::kReplyThroughPage,
                                static_cast<uint32_t>(len), seq};
      if (int e = SendMessage(ctx.fd(), &h, sizeof(h), body.data(), len, &fd, 1)) {
        Die(std::string("the daemon closed the connection: ") + strerror(e));
      }
      a = PageReply(ctx, page, op, seq);
      ++socket_to_page;
    } else if (by_page) {
      a = PageCall(ctx, page, op, body.data(), len);
      ++page_calls;
    } else {
      a = ctx.Call(op, body.data(), len, fd >= 0 ? &fd : nullptr, fd >= 0 ? 1 : 0);
    }
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
  // The page's requests were served as such (not, say, all over the socket).
  {
    Channel cli(path);
    GreetAsCli(cli);
    Answer st = cli.Call(static_cast<uint16_t>(Op::kStatus), nullptr, 0);
    const std::string json(st.body.begin(), st.body.end());
    const char key[] = "\"requests_by_call_page\":";
    const size_t at = json.find(key);
    RAW_CHECK(at != std::string::npos);
    const long counted = atol(json.c_str() + at + strlen(key));
    if (counted < page_calls + page_refusals) {
      Die("status counts " + std::to_string(counted) + " page requests, " +
          std::to_string(page_calls + page_refusals) + " were made");
    }
    const char offered_key[] = "\"backings_offered\":";
    const size_t offered_at = json.find(offered_key);
    RAW_CHECK(offered_at != std::string::npos);
    if (atol(json.c_str() + offered_at + strlen(offered_key)) < offers) {
      Die("status counts fewer offers than the " + std::to_string(offers) + " sent");
    }
    // Most of them are no memfd, or not sealed: refused, and counted.
    const char refused_key[] = "\"backing_offers_refused\":";
    const size_t refused_at = json.find(refused_key);
    RAW_CHECK(refused_at != std::string::npos);
    if (offers >= 12 && atol(json.c_str() + refused_at + strlen(refused_key)) == 0) {
      Die("no offer was refused, of " + std::to_string(offers) + " mostly malformed ones");
    }
  }
  printf(
      "call page: %ld requests, %ld malformed ones refused, %ld torn ones, %ld with a descriptor "
      "over the socket answered through it; %ld memfds (or other things) offered\n",
      page_calls, page_refusals, torn, socket_to_page, offers);
  printf("%zu ops take a body; %ld requests: %ld succeeded, errors", ops.size(), 2 * requests, ok);
  for (const auto& [e, n] : errors)
    printf(" %s %ld", strerrorname_np(e) ? strerrorname_np(e) : "?", n);
  printf("\nsucceeded at least once (%zu ops):", ok_by_op.size());
  for (const auto& [op, n] : ok_by_op) printf(" %s", protocol::OpName(static_cast<Op>(op)));
  printf("\n");
  return 0;
}
