// The shared-memory layouts of the softverbs data path. Every struct here is
// mapped by several processes at once (the daemon, the owner of an object and
// the peers that execute work requests against it), so each field is
// documented, fixed in size (static_assert) and covered by kLayoutVersion:
// change any of them and bump the version.
//
// Memory objects (all memfds, created by softverbsd except MR backings):
//   - the device table: one per daemon; MR keys and QP states, so that an
//     initiator validates a remote key or a target QP with loads only;
//   - one ring file per CQ (CqHeader + CqEntry[capacity]);
//   - one receive-queue file per QP and per SRQ (RecvQueueHeader +
//     RecvWqe slots); a QP on an SRQ has an empty receive queue;
//   - one backing file per registered range of whole pages (made by the
//     owner's library at ibv_reg_mr, see docs/datapath.md).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/device_limits.h"

namespace softverbs::datapath {

// 2: XRC (QpEntry xrcd/events, SRQ number); 3: MrEntry::inflight in its own
// line, per-slot RecvWqe::seq, cache-line-aligned WQE slots; 4: memory
// windows (MrEntry::window_of, bound_qpn); 10: no MrEntry::inflight (a peer
// inside an access counts only in its access record); 11: CqEntry::recv_wqe;
// 12: receive rings of twice the WQEs that may be posted; 14: indirect
// memory keys (kMrIndirect, MkeyLayout after the QP entries); 15: a
// signature key's block signature (MkeyLayout::sig, SigAttr).
inline constexpr uint32_t kLayoutVersion = 16;

inline constexpr uint32_t kDeviceTableMagic = 0x54445653;  // "SVDT"
inline constexpr uint32_t kCqMagic = 0x51435653;           // "SVCQ"
inline constexpr uint32_t kRecvQueueMagic = 0x51525653;    // "SVRQ"

// Slot counts are the device limits max_mr and max_qp: a key or a QP
// number maps to exactly one slot, and the daemon never hands out a number
// whose slot is taken (daemon/number_space.h).
inline constexpr uint32_t kMrSlots = static_cast<uint32_t>(limits::kMaxMr);
inline constexpr uint32_t kQpSlots = static_cast<uint32_t>(limits::kMaxQp);
inline constexpr uint32_t kFirstQpn = limits::kFirstQpn;
// Every live MR / QP can have a slot of its own.
static_assert(kMrSlots <= limits::kMaxMrIndex && kQpSlots <= limits::kMaxQpn - kFirstQpn);

// QpEntry::state when the QP no longer exists (destroyed, or its owner died).
inline constexpr uint32_t kQpGone = 0xff;

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint64_t>) == 8);

// One registered memory region, or one memory window (ibv_alloc_mw: MRs and
// windows share the key space, as mlx5's mkeys do). Written by the daemon
// only; readers load lkey/rkey with acquire and then
// read the rest (the daemon stores the keys last on publish and clears them
// first on invalidation).
//
// A window has lkey 0 (it never serves a local access) and rkey 0 while it
// is not bound. Bound, its iova/length/access/pdn are the bind's, addr the
// owner va of iova, and window_of the lkey of the MR it lies in: an access
// checks the window, then reaches the bytes through that MR (its mapping,
// its slot in the access records, its lkey still published).
//
// Two cache lines: the first holds everything a key check reads and is
// written only when the daemon publishes, so every process keeps a shared
// copy; the second the fields read only when a peer maps the MR. Nothing in
// either is written per access (a peer inside an access counts in its own
// access record, below).
struct alignas(64) MrEntry {
  std::atomic<uint32_t> lkey;          // the MR's lkey; 0 = slot free or invalidated
  std::atomic<uint32_t> rkey;          // the MR's rkey; 0 = slot free or invalidated
  std::atomic<uint32_t> access;        // ibv_access_flags of the registration
  std::atomic<uint32_t> owner;         // client group of the registering context (whose keys)
  std::atomic<uint32_t> pdn;           // PD number; must equal the accessing QP's
  std::atomic<uint32_t> generation;    // bumped on every publish of this slot
  std::atomic<uint32_t> window_of;     // a bound window: its MR's lkey; 0 = an MR, or unbound
  std::atomic<uint32_t> bound_qpn;     // a bound type 2 window: the only QP it serves; else 0
  std::atomic<uint64_t> iova;          // first address of the MR as keys address it
  std::atomic<uint64_t> length;        // bytes
  std::atomic<uint64_t> addr;          // owner's virtual address of iova
  std::atomic<uint64_t> backed_begin;  // owner va of the first memfd-backed page
  // Second cache line.
  uint32_t reserved1;  // was the shared in-flight count (layout 3-9)
  // The client (process) whose memory the MR is; `owner` is the group whose
  // keys these are (the same unless a context was imported across processes).
  std::atomic<uint32_t> registrant;
  std::atomic<uint64_t> backed_end;     // owner va past the last backed page (== begin: none)
  std::atomic<uint64_t> backed_offset;  // offset of backed_begin in the backing memfd
  uint64_t reserved2[5];
};
static_assert(sizeof(MrEntry) == 128);
static_assert(offsetof(MrEntry, registrant) == 68);

// MrEntry::access of an indirect memory key (mlx5dv_create_mkey): its
// zero-based range (iova 0, `length` bytes) is made of pieces of MRs, as
// its MkeyLayout in the same slot says; `addr` and the backed range mean
// nothing. No ibv_access_flags bit is this one.
inline constexpr uint32_t kMrIndirect = 1u << 31;

// One entry of an indirect key's layout, as the UMR work request carries it
// (SendWr inline bytes, as mlx5's UMR WQE carries its KLMs inline) and the
// device's request names it. The layout is `repeat_count` blocks; in block
// r, each entry in turn gives bytes_count bytes at addr + r * stride of its
// MR (mlx5dv_wr_mr_interleaved; a list, mlx5dv_wr_mr_list, is one block
// whose strides do not matter).
struct UmrEntry {
  uint64_t addr;         // the entry's first byte in block 0, in its MR's iova space
  uint32_t lkey;         // the MR (the key's PD and owner; not a window or another key)
  uint32_t bytes_count;  // bytes the entry gives per block
  uint32_t stride;       // bytes_count + bytes_skip: how far the next block's bytes are
  uint32_t reserved;
};
static_assert(sizeof(UmrEntry) == 24);

// A block signature's kind in one domain (mlx5dv_sig_block_domain's
// sig_type and its CRC type or T10-DIF guard type, as one code).
enum SigKind : uint8_t {
  kSigNone = 0,
  kSigCrc32 = 1,       // CRC-32 (IEEE 802.3), 4 bytes, big-endian
  kSigCrc32c = 2,      // CRC-32C (Castagnoli), 4 bytes, big-endian
  kSigT10DifCrc = 3,   // T10-DIF, guard a CRC-16 (T10-DIF polynomial), 8 bytes
  kSigT10DifCsum = 4,  // T10-DIF, guard an IP checksum, 8 bytes
};

// One domain (the memory or the wire) of a signature key: after every
// block_size bytes of data the domain holds that block's signature (or
// none: kSigNone). Written by the daemon, packed into MkeyLayout::sig.
struct SigDomain {
  uint8_t kind;         // SigKind
  uint8_t seed_ones;    // CRC: the seed is all ones (else 0); T10-DIF: the guard's seed is 0xffff
  uint16_t dif_flags;   // T10-DIF: mlx5dv_sig_t10dif_flags (REF_REMAP, APP_ESCAPE, APP_REF_ESCAPE)
  uint16_t block_size;  // data bytes a block: 512, 520, 4048, 4096 or 4160
  uint16_t app_tag;     // T10-DIF: the application tag of every block
  uint32_t ref_tag;     // T10-DIF: block 0's reference tag (REF_REMAP: one more each block)
};
static_assert(sizeof(SigDomain) == 12);

// A signature key's block signature (mlx5dv_wr_set_mkey_sig_block): the key's
// layout is the memory domain; an access through the key sees the wire
// domain, each block's signature generated, checked or copied on the way.
struct SigAttr {
  SigDomain mem;
  SigDomain wire;
  // Bytes of the incoming domain's signature that are checked (the memory's
  // when the key is read, the wire's when it is written): bit 7 - i is byte i
  // (mlx5dv_sig_mask).
  uint8_t check_mask;
  // Bytes of the wire's signature that are the memory's, copied rather than
  // generated (both domains of one kind and block size; same bit order).
  uint8_t copy_mask;
  uint8_t enabled;  // 1: the key has a block signature (else the rest is 0)
  uint8_t reserved[5];
};
static_assert(sizeof(SigAttr) == 32);
// A UMR work request carries its layout and block signature inline.
static_assert(limits::kMaxMkeyEntries * sizeof(UmrEntry) + sizeof(SigAttr) <=
              limits::kMaxInlineData);

// The layout of the indirect key in MR slot i (DeviceTable::MkeyLayoutSlot).
// Written by the daemon only, under `sequence` (a sequence lock: odd while
// the entries change), with the key's MrEntry keys cleared; readers copy it
// (datapath/mkey_layout.h) after their key check and use the copy if the
// sequence was even and unchanged around it.
struct MkeyLayout {
  std::atomic<uint32_t> sequence;      // bumped before and after every write: odd = writing
  std::atomic<uint32_t> num_entries;   // 0..kMaxMkeyEntries
  std::atomic<uint32_t> repeat_count;  // blocks (a list: 1)
  uint32_t reserved1;
  std::atomic<uint64_t> length;  // bytes the key addresses: sum of bytes_count * repeat_count
  uint64_t reserved2;
  struct Entry {  // an UmrEntry, field by field
    std::atomic<uint64_t> addr;
    std::atomic<uint32_t> lkey;
    std::atomic<uint32_t> bytes_count;
    std::atomic<uint32_t> stride;
    uint32_t reserved;
  } entry[limits::kMaxMkeyEntries];
  // A signature key's SigAttr, its 32 bytes as four words (all 0: none).
  std::atomic<uint64_t> sig[4];
};
static_assert(sizeof(SigAttr) == sizeof(MkeyLayout::sig));
static_assert(sizeof(MkeyLayout::Entry) == sizeof(UmrEntry));
static_assert(sizeof(MkeyLayout) == 256);

// One QP number. Written by the daemon (create, modify, error, destroy,
// client death); peers read it before they touch the QP's queues.
struct QpEntry {
  std::atomic<uint32_t> qpn;            // the QP number in this slot; 0 = free
  std::atomic<uint32_t> state;          // ibv_qp_state, or kQpGone
  std::atomic<uint32_t> generation;     // bumped each time the slot gets a new QP
  std::atomic<uint32_t> type;           // ibv_qp_type, or a DC type (verbs/qp_names.h)
  std::atomic<uint32_t> owner;          // client group of the creator (whose keys serve it)
  std::atomic<uint32_t> pdn;            // PD number (MR accesses must match it)
  std::atomic<uint32_t> qkey;           // UD: Q_Key datagrams must carry; DCT: DC key, low word
  std::atomic<uint32_t> access;         // qp_access_flags (REMOTE_WRITE/READ/ATOMIC)
  std::atomic<uint32_t> dest_qpn;       // RC/UC: the connected QP; DCT: DC key, high word
  std::atomic<uint32_t> srqn;           // SRQ feeding this QP's receives; 0 = own RQ
  std::atomic<uint32_t> min_rnr_timer;  // responder's RNR NAK timer code (IBTA 9.7.5.2.8)
  std::atomic<uint32_t> sl;             // service level from the QP's address vector
  std::atomic<uint32_t> xrcd;           // XRC_RECV: its XRC domain (daemon id); else 0
  std::atomic<uint32_t> comm_est;       // RC/UC/XRC_RECV: 1 once COMM_EST was raised in RTR
  std::atomic<uint32_t> requester;      // RequesterAttributes, packed (PackRequester)
  // Work requests of this QP the device's network transport has finished
  // (completed, flushed, or dropped with the send queue), counted before
  // their completions are written: the posting library counts what it
  // posted over the network, and the difference is what occupies the send
  // queue against max_send_wr. Free-running; 0 when the slot gets its QP.
  std::atomic<uint32_t> wire_retired;
};
static_assert(sizeof(QpEntry) == 64);

// A DCT has neither a Q_Key nor a connected QP: its 64-bit DC access key,
// which every DCI's message must name, takes those two words (the device
// writes it with the entry, the same value at each publication).
inline void SetDcAccessKey(QpEntry* e, uint64_t key) {
  e->qkey.store(static_cast<uint32_t>(key));
  e->dest_qpn.store(static_cast<uint32_t>(key >> 32));
}
inline uint64_t DcAccessKeyOf(const QpEntry& e) {
  return uint64_t{e.dest_qpn.load(std::memory_order_relaxed)} << 32 |
         e.qkey.load(std::memory_order_relaxed);
}

// What a QP's requester needs of its attributes, as the device last
// published them: ibv_modify_qp's mask is applied once, by the device, and
// the posting side reads the result (QpEntry::requester).
struct RequesterAttributes {
  uint8_t timeout = 0;            // local ACK timeout code (IBTA 9.7.6.1.3)
  uint8_t retry_cnt = 0;          // 0..7
  uint8_t rnr_retry = 0;          // 0..7, 7 = forever
  uint8_t path_mtu = 0;           // enum ibv_mtu (0 before RTR)
  bool path_leaves_host = false;  // its RTR path leads to another host (common/gid_table.h)
};

// The packed word: | bits | field |
//                  | 0-4  | timeout |
//                  | 8-10 | retry_cnt |
//                  | 12-14| rnr_retry |
//                  | 16-18| path_mtu |
//                  | 24   | path_leaves_host |
inline uint32_t PackRequester(const RequesterAttributes& a) {
  return (a.timeout & 0x1fu) | (a.retry_cnt & 0x7u) << 8 | (a.rnr_retry & 0x7u) << 12 |
         (a.path_mtu & 0x7u) << 16 | uint32_t{a.path_leaves_host} << 24;
}
inline RequesterAttributes UnpackRequester(uint32_t w) {
  RequesterAttributes a;
  a.timeout = w & 0x1f;
  a.retry_cnt = (w >> 8) & 0x7;
  a.rnr_retry = (w >> 12) & 0x7;
  a.path_mtu = (w >> 16) & 0x7;
  a.path_leaves_host = (w >> 24) & 1;
  return a;
}

// The device table file: header, then kMrSlots MrEntry, then kQpSlots
// QpEntry, then kMrSlots MkeyLayout (pages appear only where a slot held
// an indirect key).
struct DeviceTableHeader {
  uint32_t magic;           // kDeviceTableMagic
  uint32_t layout_version;  // kLayoutVersion
  uint32_t mr_slots;        // kMrSlots
  uint32_t qp_slots;        // kQpSlots
  uint64_t mr_offset;       // byte offset of MrEntry[0]
  uint64_t qp_offset;       // byte offset of QpEntry[0]
  uint64_t mkey_offset;     // byte offset of MkeyLayout[0] (one per MR slot)
  // Bumped (release) by the device after every change of its flow steering
  // rules: a library that keeps a copy of the rules to steer raw frames by
  // fetches them again when it reads another value (acquire).
  std::atomic<uint32_t> flow_epoch;
  uint8_t reserved[20];
};
static_assert(sizeof(DeviceTableHeader) == 64);

inline constexpr uint64_t kDeviceTableMrOffset = 4096;
inline constexpr uint64_t kDeviceTableQpOffset = kDeviceTableMrOffset + kMrSlots * sizeof(MrEntry);
inline constexpr uint64_t kDeviceTableMkeyOffset =
    (kDeviceTableQpOffset + kQpSlots * sizeof(QpEntry) + 4095) / 4096 * 4096;
inline constexpr uint64_t kDeviceTableSize = kDeviceTableMkeyOffset + kMrSlots * sizeof(MkeyLayout);

// A context's access record: a memfd of kMrSlots counts (uint32_t, index
// MrSlotOf(key)), how many accesses of each MR of another process this
// context is inside right now (Host::AccessRecord: incremented, seq_cst,
// before the key check, decremented after the access). It is the only count
// of a peer's accesses: the daemon, which got the file at hello (sealed
// against shrinking) and maps it read-only, sums a slot over the live
// contexts' records when it deregisters an MR, after clearing its keys, and
// the owner's ibv_dereg_mr waits until that sum is 0. A context that is gone
// (a process killed inside an access) leaves the sum with its record. Each
// context writes only lines of its own, so counting moves no cache line
// between processes. Pages appear only for the slots a context touches.
inline constexpr uint64_t kAccessRecordSize = kMrSlots * sizeof(std::atomic<uint32_t>);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

// A completion queue: a bounded multi-producer, single-consumer ring. Any
// process that completes work for this CQ (its owner for send completions,
// peers for receive completions) reserves a slot by CAS on `tail`, fills the
// entry and publishes it by storing `seq`; the owner consumes at `head`.
struct CqHeader {
  uint32_t magic;           // kCqMagic
  uint32_t layout_version;  // kLayoutVersion
  uint32_t capacity;        // entries, a power of two
  uint32_t entry_size;      // sizeof(CqEntry)
  uint32_t cqn;             // the CQ number
  // kCqStampCompletions: producers write the device clock into each
  // completion (the owner asked for completion timestamps). Set by the owner
  // before the CQ is used; on the line producers read for `capacity`.
  std::atomic<uint32_t> flags;
  // Completion-event moderation (ibv_modify_cq, written by the owner):
  // cq_count in bits 0-15, cq_period in microseconds in bits 16-31. Both
  // non-zero: an armed CQ raises its event once cq_count completions came
  // since the arm, or cq_period after the first of them (the owner's
  // progress thread fires that one); otherwise at the first, unmoderated.
  std::atomic<uint32_t> moderation;
  uint32_t reserved0[9];
  alignas(64) std::atomic<uint64_t> tail;  // next slot a producer reserves
  uint8_t pad1[56];
  alignas(64) std::atomic<uint64_t> head;  // next slot the owner consumes
  uint8_t pad2[56];
  alignas(64) std::atomic<uint32_t> armed;   // 0: not armed, 1: any completion, 2: solicited only
  std::atomic<uint32_t> events_raised;       // completion events signalled (owner counts delivered)
  std::atomic<uint32_t> overruns;            // completions dropped because the ring was full
  std::atomic<uint32_t> since_arm;           // moderated: completions pushed since the arm
  std::atomic<uint64_t> first_since_arm_ns;  // moderated: device clock of the first of them; 0 none
  uint8_t pad3[40];
};
static_assert(sizeof(CqHeader) == 256);

// One completion: the fields of struct ibv_wc, plain data. A RoCE device
// reports pkey_index, slid and dlid_path_bits as 0: they have no field.
struct Completion {
  uint64_t wr_id;
  uint8_t status;       // ibv_wc_status
  uint8_t opcode;       // ibv_wc_opcode (all below 256)
  uint16_t wc_flags;    // ibv_wc_flags (all below 1 << 16)
  uint32_t vendor_err;  // softverbs reason code (VendorError) of an error completion
  uint32_t byte_len;
  uint32_t imm_data;  // network order, as ibv_wc.imm_data
  uint32_t qp_num;    // local QP
  uint32_t src_qp;    // remote QP (receive completions)
  uint8_t sl;
  uint8_t solicited;  // the send carried IBV_SEND_SOLICITED
  uint16_t reserved0;
  uint32_t tm_priv;  // tag matching: the TMH's app_ctx (ibv_wc_tm_info.priv)
  // The device clock (DeviceClockNs) when the completion was written, on a
  // CQ with kCqStampCompletions; 0 otherwise.
  uint64_t timestamp;
  uint64_t tm_tag;  // tag matching: the matched tag (ibv_wc_tm_info.tag)
};
static_assert(sizeof(Completion) == 56);
static_assert(offsetof(Completion, timestamp) % 8 == 0);

inline constexpr uint32_t kCqStampCompletions = 1u << 0;  // CqHeader::flags

// One ring slot.
struct CqEntry {
  std::atomic<uint32_t> seq;  // (slot index + 1), low 32 bits, once published; acquire it
  // A receive completion: the consumed WQE's index in its receive queue + 1,
  // low 32 bits (0: not said). The CQ's owner passes it to the QP's own
  // receive queue (RecvQueue::NoteConsumed), whose next post then need not
  // read the claimers' head - as libmlx5 frees a receive slot when its
  // completion is polled.
  uint32_t recv_wqe;
  Completion completion;
};
static_assert(sizeof(CqEntry) == 64);

// A receive queue (a QP's or an SRQ's): one producer (the owner posts) and
// many consumers (every peer that delivers a message claims the WQE at
// `head` by CAS, after copying it out). Claimers learn that the WQE at
// `head` is posted from its own `seq` (RecvWqe), not from `tail`: a message
// then reads the WQE's line and not also the owner's tail line.
struct RecvQueueHeader {
  uint32_t magic;           // kRecvQueueMagic
  uint32_t layout_version;  // kLayoutVersion
  // Slots, a power of two (0: this QP has no own receive queue). Half of
  // them may hold posted WQEs (the max_wr asked for, rounded up to a power
  // of two: what the QP or SRQ reports): a post then refills a slot
  // claimers last read that many WQEs ago rather than the one just claimed,
  // whose line the claimer still holds (docs/datapath.md, "Rings").
  uint32_t capacity;
  uint32_t max_sge;     // scatter entries per WQE
  uint32_t wqe_stride;  // bytes per slot
  // An SRQ's number while it exists (0: a QP's queue, or the SRQ is gone).
  // XRC initiators address SRQs by number and check it before delivering.
  std::atomic<uint32_t> srqn;
  // A tag-matching SRQ (IBV_SRQT_TM): its tag list (TmListHeader, then
  // tm_tags TmTag) at byte tm_offset of the file; 0 for other queues.
  uint32_t tm_tags;
  uint32_t tm_offset;
  uint32_t reserved0[8];
  alignas(64) std::atomic<uint64_t> head;  // next WQE to claim (consumers)
  uint8_t pad1[56];
  alignas(64) std::atomic<uint64_t> tail;  // next slot the owner fills (Count(), resize)
  uint8_t pad2[56];
  alignas(64) std::atomic<uint32_t> srq_limit;  // SRQ: armed limit, 0 = not armed
  uint8_t pad3[60];
};
static_assert(sizeof(RecvQueueHeader) == 256);

struct RecvSge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};
static_assert(sizeof(RecvSge) == 16);

// One receive WQE, followed by max_sge RecvSge. Slots are a whole number of
// cache lines (wqe_stride) and start on a line, so the owner filling one
// slot never disturbs a claimer reading another, and a WQE of up to three
// SGEs is one line.
struct RecvWqe {
  uint64_t wr_id;
  uint32_t num_sge;
  // (slot index + 1), low 32 bits, stored with release once the WQE is
  // written: a claimer acquires it and compares it with head + 1.
  std::atomic<uint32_t> seq;
  // RecvSge sge[max_sge];
};
static_assert(sizeof(RecvWqe) == 16);
static_assert(sizeof(RecvQueueHeader) % 64 == 0);

// Tag matching (IBV_SRQT_TM, ibv_post_srq_ops(3)): the SRQ's tag list,
// after its WQE slots. The owner adds and removes tags (ibv_post_srq_ops);
// whoever delivers a message to the SRQ matches the message's tag against
// the posted tags (datapath/tag_matching.h). Both take `lock` for the
// whole of an operation: a tag is matched once, or removed, never both.
struct TmListHeader {
  // PTHREAD_PROCESS_SHARED and PTHREAD_MUTEX_ROBUST, initialised by the
  // device: a process that dies holding it does not leave it held (the next
  // taker gets EOWNERDEAD and goes on; every operation writes a tag's state
  // last, so a half-done one leaves no half-posted tag).
  pthread_mutex_t lock;
  uint32_t num_tags;  // TmTag slots (the SRQ's max_num_tags)
  // Phase synchronisation: unexpected messages the device delivered, and
  // the count the owner last reported (IBV_OPS_TM_SYNC). Tags match only
  // while the two are equal; otherwise every tagged message is unexpected.
  uint32_t hw_unexpected;
  uint32_t sw_unexpected;
  uint32_t reserved;
  uint64_t next_seq;  // posting order of the next tag added
};
static_assert(sizeof(pthread_mutex_t) == 40);
static_assert(sizeof(TmListHeader) == 64);

inline constexpr uint32_t kTmTagFree = 0;
inline constexpr uint32_t kTmTagPosted = 1;

struct TmTag {
  uint32_t state;       // kTmTagFree or kTmTagPosted
  uint16_t generation;  // bumped whenever the slot frees: stale handles miss
  uint16_t num_sge;     // 0 or 1
  uint64_t recv_wr_id;  // the wr_id of the message's completion
  uint64_t tag;
  uint64_t mask;  // a message matches if (its tag & mask) == (tag & mask)
  uint64_t seq;   // posting order: the oldest matching tag wins
  RecvSge sge;    // the buffer (num_sge 1)
  uint8_t reserved[8];
};
static_assert(sizeof(TmTag) == 64);

inline uint32_t QpSlotOf(uint32_t qpn) {
  return (qpn - kFirstQpn) % kQpSlots;
}
inline uint32_t MrSlotOf(uint32_t key) {
  return ((key >> 8) & limits::kMaxMrIndex) % kMrSlots;
}
inline uint32_t RoundUpPow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace softverbs::datapath
