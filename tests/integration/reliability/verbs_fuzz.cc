// A verbs fuzzer (issue 10, point 8): random verb calls with random
// arguments, valid and not, against the real device - create / modify /
// query / destroy of PDs, MRs, CQs, QPs, SRQs and AHs, posts with bad keys,
// lengths, opcodes and SGE counts, polls - from one seed. After every call:
//   - the process is alive (a crash fails the run: its ctest sees the signal);
//   - a failed call gave an errno (never 0), and a failed ibv_modify_qp left
//     the QP as ibv_query_qp saw it before (state and every attribute);
//   - no step hangs: a watchdog (alarm) ends the run, naming seed and step.
// At the end everything is destroyed and the context closed; the calling
// script checks that the device then holds no object (kill_loop.sh's check).
//
//   verbs_fuzz SEED STEPS
// prints per-verb call and failure counts (by errno) as JSON.
#include <errno.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

// Whether paths and AHs may name GIDs that are not this host's. Such
// traffic goes to the network (the device's RoCE transport), so the fuzzer
// makes them up only when verbs_fuzz.sh runs it in a network namespace of
// its own (VERBS_FUZZ_FOREIGN_GIDS=1), where nothing can leave the machine.
bool ForeignGids() {
  static const bool yes = [] {
    const char* v = getenv("VERBS_FUZZ_FOREIGN_GIDS");
    return v && strcmp(v, "1") == 0;
  }();
  return yes;
}

uint64_t g_seed = 0;
volatile sig_atomic_t g_step = 0;

void OnAlarm(int) {
  char msg[128];
  int n = snprintf(msg, sizeof(msg), "verbs_fuzz: HANG: seed %llu step %ld took over 20 s\n",
                   static_cast<unsigned long long>(g_seed), static_cast<long>(g_step));
  if (write(2, msg, static_cast<size_t>(n)) < 0) _exit(3);
  _exit(3);
}

template <typename E>
void PutRaw(E* field, uint32_t value) {
  static_assert(sizeof(E) == sizeof(value));
  memcpy(field, &value, sizeof(value));
}

struct Mr {
  ibv_mr* mr;
  std::vector<uint8_t>* buf;
};
struct Qp {
  ibv_qp* qp;
  ibv_qp_type type;
};

class Fuzzer {
 public:
  Fuzzer(uint64_t seed, ibv_context* ctx) : rng_(seed), ctx_(ctx) {}

  void Step() {
    switch (Pick(17)) {
      case 0:
        AllocPd();
        break;
      case 1:
        DeallocPd();
        break;
      case 2:
      case 3:
        RegMr();
        break;
      case 4:
        DeregMr();
        break;
      case 5:
        CreateCq();
        break;
      case 6:
        DestroyCq();
        break;
      case 7:
        CreateQp();
        break;
      case 8:
        DestroyQp();
        break;
      case 9:
      case 10:
        ModifyQp();
        break;
      case 11:
        PostSend();
        break;
      case 12:
        PostRecv();
        break;
      case 13:
        PollCq();
        break;
      case 14:
        SrqOp();
        break;
      case 15:
        AhOp();
        break;
      default:
        QueryQp();
        break;
    }
  }

  void DestroyAll() {
    for (ibv_ah* ah : ahs_) Count("destroy_ah", ibv_destroy_ah(ah));
    for (Qp& q : qps_) Count("destroy_qp", ibv_destroy_qp(q.qp));
    for (ibv_srq* s : srqs_) Count("destroy_srq", ibv_destroy_srq(s));
    for (ibv_cq* c : cqs_) Count("destroy_cq", ibv_destroy_cq(c));
    for (Mr& m : mrs_) {
      Count("dereg_mr", ibv_dereg_mr(m.mr));
      delete m.buf;
    }
    for (ibv_pd* p : pds_) Count("dealloc_pd", ibv_dealloc_pd(p));
    ahs_.clear(), qps_.clear(), srqs_.clear(), cqs_.clear(), mrs_.clear(), pds_.clear();
  }

  void Report() const {
    printf("{\"seed\": %llu, \"failures\": %d, \"verbs\": {",
           static_cast<unsigned long long>(g_seed), violations_);
    bool first = true;
    for (const auto& [verb, by_errno] : calls_) {
      printf("%s\"%s\": {", first ? "" : ", ", verb.c_str());
      first = false;
      bool f2 = true;
      for (const auto& [err, n] : by_errno) {
        printf("%s\"%s\": %ld", f2 ? "" : ", ", err == 0 ? "ok" : strerrorname_np(err), n);
        f2 = false;
      }
      printf("}");
    }
    printf("}}\n");
  }
  int violations() const { return violations_; }

 private:
  uint32_t Pick(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }
  bool Chance(uint32_t percent) { return Pick(100) < percent; }
  template <typename T>
  T* Any(std::vector<T*>& v) {
    return v.empty() ? nullptr : v[Pick(v.size())];
  }
  // A value that is usually sensible and sometimes anything.
  uint32_t Num(uint32_t sensible_max) {
    if (sane_ || Chance(80)) return Pick(sensible_max + 1);
    static const uint32_t kEdges[] = {0, 1, 0x7fffffff, 0x80000000, 0xffffffff, 0xffff, 0x10000};
    return Chance(50) ? kEdges[Pick(7)] : static_cast<uint32_t>(rng_());
  }

  // Counts a verb's outcome (rc: 0 or an errno-style return).
  void Count(const char* verb, int rc) { ++calls_[verb][rc]; }
  void CountNull(const char* verb, const void* obj) {
    if (obj) {
      ++calls_[verb][0];
      return;
    }
    if (errno == 0) Violation(verb, "failed with errno 0");
    ++calls_[verb][errno];
  }
  void Violation(const char* verb, const std::string& what) {
    ++violations_;
    fprintf(stderr, "verbs_fuzz: seed %llu step %ld: %s %s\n",
            static_cast<unsigned long long>(g_seed), static_cast<long>(g_step), verb, what.c_str());
  }

  ibv_pd* SomePd() { return Chance(3) ? nullptr : Any(pds_); }
  ibv_cq* SomeCq() { return Chance(3) ? nullptr : Any(cqs_); }
  uint32_t SomeKey() {
    if (!mrs_.empty() && Chance(70)) {
      Mr& m = mrs_[Pick(mrs_.size())];
      return Chance(50) ? m.mr->lkey : m.mr->rkey;
    }
    return Num(0x2000);
  }

  void AllocPd() {
    if (pds_.size() >= 4) return;
    errno = 0;
    ibv_pd* pd = ibv_alloc_pd(ctx_);
    CountNull("alloc_pd", pd);
    if (pd) pds_.push_back(pd);
  }
  void DeallocPd() {
    if (pds_.empty()) return;
    const size_t i = Pick(pds_.size());
    const int rc = ibv_dealloc_pd(pds_[i]);
    Count("dealloc_pd", rc);
    if (rc == 0) pds_.erase(pds_.begin() + static_cast<long>(i));
  }
  void RegMr() {
    if (mrs_.size() >= 16) return;
    ibv_pd* pd = SomePd();
    const size_t len = Chance(90) ? 1 + Pick(3 * 4096) : Pick(64);
    auto* buf = new std::vector<uint8_t>(len + 1);
    uint32_t access = Pick(1u << 7);  // LOCAL_WRITE..ZERO_BASED-ish bits
    if (Chance(5)) access |= 1u << Pick(32);
    const size_t reg_len = Chance(95) ? len : Num(1 << 20);
    errno = 0;
    ibv_mr* mr = pd ? ibv_reg_mr(pd, buf->data(), reg_len, static_cast<int>(access)) : nullptr;
    if (!pd) {
      delete buf;
      return;
    }
    CountNull("reg_mr", mr);
    if (mr) {
      mrs_.push_back({mr, buf});
    } else {
      delete buf;
    }
  }
  void DeregMr() {
    if (mrs_.empty()) return;
    const size_t i = Pick(mrs_.size());
    const int rc = ibv_dereg_mr(mrs_[i].mr);
    Count("dereg_mr", rc);
    if (rc == 0) {
      delete mrs_[i].buf;
      mrs_.erase(mrs_.begin() + static_cast<long>(i));
    }
  }
  void CreateCq() {
    if (cqs_.size() >= 4) return;
    errno = 0;
    ibv_cq* cq =
        ibv_create_cq(ctx_, static_cast<int>(Num(256)), nullptr, nullptr, static_cast<int>(Num(2)));
    CountNull("create_cq", cq);
    if (cq) cqs_.push_back(cq);
  }
  void DestroyCq() {
    if (cqs_.empty()) return;
    const size_t i = Pick(cqs_.size());
    const int rc = ibv_destroy_cq(cqs_[i]);
    Count("destroy_cq", rc);
    if (rc == 0) cqs_.erase(cqs_.begin() + static_cast<long>(i));
  }
  void CreateQp() {
    if (qps_.size() >= 8) return;
    ibv_pd* pd = SomePd();
    if (!pd) return;
    static const ibv_qp_type kTypes[] = {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD};
    ibv_qp_init_attr init{};
    init.send_cq = SomeCq();
    init.recv_cq = Chance(80) ? init.send_cq : SomeCq();
    if (!init.send_cq || !init.recv_cq) return;  // NULL CQs: libibverbs' own crash, not ours
    init.qp_type = kTypes[Pick(3)];
    // Any type number but 5: the legacy OFED IBV_QPT_XRC, whose caller
    // passes the larger struct ibv_xrc_qp_init_attr (the library reads its
    // xrc_domain) - a plain ibv_qp_init_attr with that type breaks the API.
    if (Chance(3)) {
      uint32_t type = Num(300);
      if (type == 5) type = 300;
      PutRaw(&init.qp_type, type);
    }
    init.cap.max_send_wr = Num(64);
    init.cap.max_recv_wr = Num(64);
    init.cap.max_send_sge = Num(8);
    init.cap.max_recv_sge = Num(8);
    init.cap.max_inline_data = Num(256);
    init.sq_sig_all = static_cast<int>(Pick(2));
    if (!srqs_.empty() && Chance(20)) init.srq = Any(srqs_);
    errno = 0;
    ibv_qp* qp = ibv_create_qp(pd, &init);
    CountNull("create_qp", qp);
    if (qp) qps_.push_back({qp, qp->qp_type});
  }
  void DestroyQp() {
    if (qps_.empty() || !Chance(30)) return;  // let QPs live long enough to get to RTS
    const size_t i = Pick(qps_.size());
    const int rc = ibv_destroy_qp(qps_[i].qp);
    Count("destroy_qp", rc);
    if (rc == 0) qps_.erase(qps_.begin() + static_cast<long>(i));
  }

  static constexpr int kAllAttrs =
      IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY | IBV_QP_ACCESS_FLAGS |
      IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT |
      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC |
      IBV_QP_ALT_PATH | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
      IBV_QP_PATH_MIG_STATE | IBV_QP_CAP | IBV_QP_DEST_QPN;

  // What a failed modify must leave as it was.
  static std::string Snapshot(const ibv_qp_attr& a) {
    char s[256];
    snprintf(s, sizeof(s),
             "state %u mtu %u dest %u access %x port %u pkey %u qkey %x sq_psn %u rq_psn %u "
             "timeout %u retry %u rnr %u min_rnr %u rd %u dest_rd %u",
             a.qp_state, a.path_mtu, a.dest_qp_num, a.qp_access_flags, a.port_num, a.pkey_index,
             a.qkey, a.sq_psn, a.rq_psn, a.timeout, a.retry_cnt, a.rnr_retry, a.min_rnr_timer,
             a.max_rd_atomic, a.max_dest_rd_atomic);
    return s;
  }

  void ModifyQp() {
    if (qps_.empty()) return;
    Qp& q = qps_[Pick(qps_.size())];
    sane_ = Chance(50);  // half the modifies carry sensible values only
    ibv_qp_attr attr{};
    // The next state in the usual order most of the time, so QPs get far.
    const uint32_t next = Chance(70) ? std::min<uint32_t>(q.qp->state + 1, IBV_QPS_RTS) : Num(8);
    PutRaw(&attr.qp_state, next);
    PutRaw(&attr.cur_qp_state, Num(8));
    attr.qp_access_flags = Num(15);
    attr.pkey_index = static_cast<uint16_t>(Num(2));
    attr.port_num = static_cast<uint8_t>(Chance(90) ? 1 : Num(3));
    attr.qkey = Num(0x11111111);
    PutRaw(&attr.path_mtu, Chance(90) ? 1 + Pick(5) : Num(9));
    attr.dest_qp_num = !qps_.empty() && Chance(80) ? Any2().qp->qp_num : Num(0x1000);
    attr.rq_psn = Num(0xffffff);
    attr.sq_psn = Num(0xffffff);
    attr.timeout = static_cast<uint8_t>(Num(31));
    attr.retry_cnt = static_cast<uint8_t>(Num(7));
    attr.rnr_retry = static_cast<uint8_t>(Num(7));
    attr.min_rnr_timer = static_cast<uint8_t>(Num(31));
    attr.max_rd_atomic = static_cast<uint8_t>(Num(16));
    attr.max_dest_rd_atomic = static_cast<uint8_t>(Num(16));
    PutRaw(&attr.path_mig_state, Num(3));
    attr.ah_attr.is_global = static_cast<uint8_t>(Chance(90) ? 1 : 0);
    attr.ah_attr.port_num = static_cast<uint8_t>(Chance(90) ? 1 : Num(3));
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(Chance(90) ? 1 : Num(20));
    attr.ah_attr.grh.hop_limit = 1;
    ibv_query_gid(ctx_, 1, 1, &attr.ah_attr.grh.dgid);
    if (ForeignGids() && Chance(5)) attr.ah_attr.grh.dgid.raw[Pick(16)] ^= 0xff;
    attr.cap.max_send_wr = Num(64);
    int mask = static_cast<int>(rng_()) & kAllAttrs;
    if (Chance(80)) mask = UsualMask(next, q.type) | (Chance(10) ? (1 << Pick(21)) : 0);
    if (Chance(2)) mask |= 1 << (21 + Pick(11));
    ibv_qp_attr before{}, after{};
    ibv_qp_init_attr init{};
    const bool queried = ibv_query_qp(q.qp, &before, kAllAttrs, &init) == 0;
    const ibv_qp_state cached = q.qp->state;
    sane_ = false;
    const int rc = ibv_modify_qp(q.qp, &attr, mask);
    Count("modify_qp", rc);
    if (rc == 0 || !queried) return;
    if (rc < 0) Violation("modify_qp", "returned a negative value");
    if (ibv_query_qp(q.qp, &after, kAllAttrs, &init) != 0) {
      Violation("modify_qp", "query after a failed modify failed");
      return;
    }
    // The one change a failed modify may meet: the QP entered ERR on its own
    // meanwhile (a message of another fuzzed QP, retried by the library's
    // progress thread, hit it with an error - as hardware does at any time),
    // or, a UC/UD QP, SQE (the device's network requester found a bad local
    // key of a WR posted before: it reports that asynchronously, as a NIC
    // does). Counted apart; every other attribute must still be as it was.
    const bool async_err = after.qp_state == IBV_QPS_ERR && before.qp_state != IBV_QPS_ERR;
    const bool async_sqe = after.qp_state == IBV_QPS_SQE &&
                           (before.qp_state == IBV_QPS_RTS || before.qp_state == IBV_QPS_SQD) &&
                           (q.type == IBV_QPT_UC || q.type == IBV_QPT_UD);
    if (async_err || async_sqe) {
      ++calls_[async_err ? "modify_qp_met_async_error" : "modify_qp_met_async_sqe"][0];
      before.qp_state = after.qp_state;
      if (Snapshot(before) == Snapshot(after)) return;
    }
    if (Snapshot(before) != Snapshot(after)) {
      char what[160];
      snprintf(what, sizeof(what), "a failed modify (%s; qp_state %u cur %u mask 0x%x, type %d) ",
               strerror(rc), next, RawCur(attr), mask, q.type);
      Violation("modify_qp", std::string(what) + "changed the QP: " + Snapshot(before) + " -> " +
                                 Snapshot(after));
    }
    if (q.qp->state != cached && !async_err && !async_sqe) {
      Violation("modify_qp", "a failed modify changed qp->state");
    }
  }
  static uint32_t RawCur(const ibv_qp_attr& a) {
    uint32_t v;
    memcpy(&v, &a.cur_qp_state, sizeof(v));
    return v;
  }
  Qp& Any2() { return qps_[Pick(qps_.size())]; }
  static int UsualMask(uint32_t next, ibv_qp_type type) {
    const bool ud = type == IBV_QPT_UD;
    switch (next) {
      case IBV_QPS_INIT:
        return IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
               (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
      case IBV_QPS_RTR:
        return ud ? IBV_QP_STATE
                  : IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        (type == IBV_QPT_RC ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0);
      case IBV_QPS_RTS:
        return IBV_QP_STATE | IBV_QP_SQ_PSN |
               (type == IBV_QPT_RC
                    ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC
                    : 0);
      default:
        return IBV_QP_STATE;
    }
  }
  void QueryQp() {
    if (qps_.empty()) return;
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    Count("query_qp", ibv_query_qp(Any2().qp, &attr, static_cast<int>(Num(1 << 21)), &init));
  }

  // At most 64 entries (beyond the device's max_sge, within the array).
  void FillSges(std::vector<ibv_sge>* sges, uint32_t n) {
    sges->resize(std::min<uint32_t>(n, 64));
    for (ibv_sge& s : *sges) {
      if (!mrs_.empty() && Chance(80)) {
        Mr& m = mrs_[Pick(mrs_.size())];
        s.addr = reinterpret_cast<uintptr_t>(m.buf->data()) + (Chance(90) ? 0 : Num(8192));
        s.length = Chance(90) ? Pick(static_cast<uint32_t>(m.buf->size())) : Num(1 << 20);
        s.lkey = Chance(90) ? m.mr->lkey : SomeKey();
      } else {
        s.addr = rng_();
        s.length = Num(4096);
        s.lkey = SomeKey();
      }
    }
  }
  void PostSend() {
    if (qps_.empty()) return;
    Qp& q = Any2();
    std::vector<ibv_sge> sges;
    FillSges(&sges, Chance(90) ? Pick(3) : Num(40));
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = rng_();
    wr.sg_list = sges.data();
    wr.num_sge = static_cast<int>(sges.size());
    PutRaw(&wr.opcode, Chance(90) ? Pick(7) : Num(20));
    wr.send_flags = Chance(90) ? static_cast<uint32_t>(IBV_SEND_SIGNALED) : Num(0x3f);
    if (wr.send_flags & IBV_SEND_INLINE) {
      // Inline data is read by the library from the application's memory,
      // as every provider does: a bad pointer there is the application's
      // crash on any device. Point the SGEs at real bytes.
      for (ibv_sge& s : sges) {
        if (mrs_.empty()) return;
        Mr& m = mrs_[Pick(mrs_.size())];
        s.addr = reinterpret_cast<uintptr_t>(m.buf->data());
        s.length = Pick(static_cast<uint32_t>(m.buf->size()));
      }
    }
    wr.wr.rdma.remote_addr =
        !mrs_.empty() && Chance(70) ? reinterpret_cast<uintptr_t>(mrs_[0].buf->data()) : rng_();
    wr.wr.rdma.rkey = SomeKey();
    if (q.type == IBV_QPT_UD) {
      if (ahs_.empty()) return;  // a UD WR without an AH: libibverbs would not catch it either
      wr.wr.ud.ah = Any(ahs_);
      wr.wr.ud.remote_qpn = Any2().qp->qp_num;
      wr.wr.ud.remote_qkey = Num(0x11111111);
    }
    const int rc = ibv_post_send(q.qp, &wr, &bad);
    Count("post_send", rc);
    if (rc && bad != &wr) Violation("post_send", "failed without pointing bad_wr at the WR");
  }
  void PostRecv() {
    if (qps_.empty()) return;
    std::vector<ibv_sge> sges;
    FillSges(&sges, Chance(90) ? 1 + Pick(2) : Num(40));
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = rng_();
    wr.sg_list = sges.data();
    wr.num_sge = static_cast<int>(sges.size());
    const int rc = ibv_post_recv(Any2().qp, &wr, &bad);
    Count("post_recv", rc);
    if (rc && bad != &wr) Violation("post_recv", "failed without pointing bad_wr at the WR");
  }
  void PollCq() {
    ibv_cq* cq = Any(cqs_);
    if (!cq) return;
    ibv_wc wc[16];
    const int n = ibv_poll_cq(cq, static_cast<int>(1 + Pick(16)), wc);
    Count("poll_cq", n < 0 ? EINVAL : 0);
  }
  void SrqOp() {
    if (!srqs_.empty() && Chance(40)) {
      const size_t i = Pick(srqs_.size());
      const int rc = ibv_destroy_srq(srqs_[i]);
      Count("destroy_srq", rc);
      if (rc == 0) srqs_.erase(srqs_.begin() + static_cast<long>(i));
      return;
    }
    ibv_pd* pd = SomePd();
    if (!pd || srqs_.size() >= 3) return;
    ibv_srq_init_attr a{};
    a.attr.max_wr = Num(64);
    a.attr.max_sge = Num(8);
    a.attr.srq_limit = Num(64);
    errno = 0;
    ibv_srq* srq = ibv_create_srq(pd, &a);
    CountNull("create_srq", srq);
    if (srq) srqs_.push_back(srq);
  }
  void AhOp() {
    if (!ahs_.empty() && Chance(40)) {
      const size_t i = Pick(ahs_.size());
      const int rc = ibv_destroy_ah(ahs_[i]);
      Count("destroy_ah", rc);
      if (rc == 0) ahs_.erase(ahs_.begin() + static_cast<long>(i));
      return;
    }
    ibv_pd* pd = SomePd();
    if (!pd || ahs_.size() >= 4) return;
    ibv_ah_attr a{};
    a.is_global = static_cast<uint8_t>(Chance(90) ? 1 : 0);
    a.port_num = static_cast<uint8_t>(Chance(90) ? 1 : Num(3));
    a.grh.sgid_index = static_cast<uint8_t>(Chance(90) ? 1 : Num(20));
    a.grh.hop_limit = 1;
    ibv_query_gid(ctx_, 1, 1, &a.grh.dgid);
    if (ForeignGids() && Chance(10)) a.grh.dgid.raw[Pick(16)] ^= 0xff;
    errno = 0;
    ibv_ah* ah = ibv_create_ah(pd, &a);
    CountNull("create_ah", ah);
    if (ah) ahs_.push_back(ah);
  }

  std::mt19937_64 rng_;
  ibv_context* ctx_;
  std::vector<ibv_pd*> pds_;
  std::vector<Mr> mrs_;
  std::vector<ibv_cq*> cqs_;
  std::vector<Qp> qps_;
  std::vector<ibv_srq*> srqs_;
  std::vector<ibv_ah*> ahs_;
  std::map<std::string, std::map<int, long>> calls_;
  int violations_ = 0;
  bool sane_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s SEED STEPS\n", argv[0]);
    return 2;
  }
  g_seed = strtoull(argv[1], nullptr, 0);
  const long steps = atol(argv[2]);
  signal(SIGALRM, OnAlarm);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    fprintf(stderr, "verbs_fuzz: no device\n");
    return 2;
  }
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!ctx) {
    fprintf(stderr, "verbs_fuzz: cannot open the device: %s\n", strerror(errno));
    return 2;
  }
  Fuzzer fuzzer(g_seed, ctx);
  for (long i = 0; i < steps; ++i) {
    g_step = i;
    alarm(20);
    fuzzer.Step();
  }
  alarm(60);
  fuzzer.DestroyAll();
  const int closed = ibv_close_device(ctx);
  alarm(0);
  fuzzer.Report();
  if (closed != 0) fprintf(stderr, "verbs_fuzz: ibv_close_device failed\n");
  return fuzzer.violations() == 0 && closed == 0 ? 0 : 1;
}
