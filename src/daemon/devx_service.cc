#include "daemon/devx_service.h"

#include <errno.h>
#include <string.h>

#include <algorithm>
#include <string>

#include "common/log.h"
#include "daemon/device.h"
#include "devx/prm_context_layouts.h"
#include "devx/prm_opcodes.h"
#include "verbs/mr_rules.h"

namespace softverbs::daemon {

using protocol::DevxEntryPoint;

namespace {

// The kernel's entry points behind the wire values.
bool ToEntryPoint(uint32_t wire, devx::EntryPoint* out) {
  switch (static_cast<DevxEntryPoint>(wire)) {
    case DevxEntryPoint::kObjCreate:
      *out = devx::EntryPoint::kObjCreate;
      return true;
    case DevxEntryPoint::kObjModify:
      *out = devx::EntryPoint::kObjModify;
      return true;
    case DevxEntryPoint::kObjQuery:
      *out = devx::EntryPoint::kObjQuery;
      return true;
    case DevxEntryPoint::kGeneralCmd:
      *out = devx::EntryPoint::kGeneralCmd;
      return true;
  }
  return false;
}

// The creators of the queues the data path shadows, and the qpc state of
// an errored QP (prm_opcodes.h / prm_context_layouts.h).
constexpr uint16_t kCreateCqOpcode = devx::opcode::kCreateCq;
constexpr uint16_t kCreateQpOpcode = devx::opcode::kCreateQp;
constexpr uint32_t kQpcStateErr = devx::layout::qp_state::kErr;

// Object kinds by creator opcode, for the status output.
const char* KindName(uint16_t creator_opcode) {
  switch (creator_opcode) {
    case 0x200:
      return "mkey";
    case 0x400:
      return "cq";
    case 0x500:
      return "qp";
    case 0x800:
      return "pd";
    case 0x816:
      return "transport_domain";
    case 0x939:
      return "flow_counter";
    default:
      return "other";
  }
}

}  // namespace

DevxService::DevxService(Device& device) : device_(device), objects_(device), firmware_(objects_) {
  // The rule a failed command broke goes back to the caller with the reply
  // (Command), whose library prints it on its own log channel.
  firmware_.SetLogSink([this](std::string_view line) { last_rule_.assign(line); });
}

DevxService::~DevxService() = default;

devx::CallerContext DevxService::CallerOf(ClientId c) const {
  auto it = uids_.find(c);
  return {c, it == uids_.end() ? uint16_t{0} : it->second};
}

uint16_t DevxService::AllocUid() {
  // Non-zero (0 means "no DEVX") and never the whitelist uid.
  for (int tries = 0; tries < 0xffff; ++tries) {
    uint16_t uid = next_uid_;
    next_uid_ = next_uid_ >= devx::kWhitelistUid - 1 ? 1 : next_uid_ + 1;
    bool used = false;
    for (const auto& [client, taken] : uids_) used = used || taken == uid;
    if (!used) return uid;
  }
  return 0;
}

uint16_t DevxService::EnsureUid(ClientId c) {
  auto it = uids_.find(c);
  if (it != uids_.end()) return it->second;
  const uint16_t uid = AllocUid();
  if (uid != 0) uids_.emplace(c, uid);
  return uid;
}

Verdict DevxService::Open(ClientId c, protocol::DevxOpenReply* out) {
  const uint16_t uid = EnsureUid(c);
  if (uid == 0) return Verdict::Fail(ENOMEM, "devx: every DEVX uid is in use");
  *out = {uid, 0};
  return Verdict::Ok();
}

Verdict DevxService::Command(ClientId c, const uint8_t* body, size_t len,
                             std::vector<uint8_t>* reply) {
  protocol::DevxCommandRequest req;
  if (len < sizeof(req)) return Verdict::Fail(EPROTO, "devx command: malformed request body");
  memcpy(&req, body, sizeof(req));
  const size_t in_len = len - sizeof(req);
  devx::EntryPoint entry_point;
  if (!ToEntryPoint(req.entry_point, &entry_point)) {
    return Verdict::Fail(EPROTO, "devx command: unknown entry point");
  }
  if (in_len > protocol::kMaxDevxBox || req.out_len > protocol::kMaxDevxBox) {
    return Verdict::Fail(EINVAL, "devx command: box larger than " +
                                     std::to_string(protocol::kMaxDevxBox) + " bytes");
  }
  // Every context is a DEVX context, as rdma-core's libmlx5 opens them (it
  // asks for a DEVX ucontext unless told otherwise): a context's first
  // DEVX command gets it its uid if mlx5dv_open_device did not.
  EnsureUid(c);
  std::span<const uint8_t> in(body + sizeof(req), in_len);
  std::vector<uint8_t> out(req.out_len);
  devx::ObjectHandle handle = req.handle;
  last_rule_.clear();
  const int result = firmware_.Execute(entry_point, CallerOf(c), in, out, &handle);

  protocol::DevxCommandReply rep{result, 0, 0};
  // The out box travels back on success and on firmware failure (EREMOTEIO);
  // a kernel-layer errno leaves the caller's box untouched.
  if (result == 0 || result == EREMOTEIO) rep.out_len = req.out_len;
  if (result == 0 && entry_point == devx::EntryPoint::kObjCreate) {
    rep.handle = handle;
    handles_[c].insert(handle);
  }
  if (result == 0) NoteQueueCommand(c, entry_point, in, handle);
  // A failure's rule follows the out box (the library logs it).
  const size_t room =
      protocol::kMaxMessageSize - sizeof(protocol::ReplyHeader) - sizeof(rep) - rep.out_len;
  const size_t rule_len = result != 0 ? std::min(last_rule_.size(), room) : 0;
  reply->resize(sizeof(rep) + rep.out_len + rule_len);
  memcpy(reply->data(), &rep, sizeof(rep));
  if (rep.out_len) memcpy(reply->data() + sizeof(rep), out.data(), rep.out_len);
  if (rule_len) memcpy(reply->data() + sizeof(rep) + rep.out_len, last_rule_.data(), rule_len);
  return Verdict::Ok();
}

Verdict DevxService::Destroy(ClientId c, const protocol::DevxDestroyRequest& req) {
  const int err = firmware_.Destroy(CallerOf(c), req.handle);
  if (err == ENOENT)
    return Verdict::Fail(EINVAL, "devx destroy: no such DEVX object in this context");
  if (err != 0) {
    return Verdict::Fail(err, std::string("devx destroy: the firmware refused (") + strerror(err) +
                                  "): another object still uses it");
  }
  if (auto it = handles_.find(c); it != handles_.end()) it->second.erase(req.handle);
  const uint16_t creator = devx::CreatorOpcodeOf(req.handle);
  if (creator == kCreateCqOpcode || creator == kCreateQpOpcode) {
    device_.DevxQueueDestroyed(c, creator == kCreateQpOpcode, devx::ObjectNumberOf(req.handle));
  }
  return Verdict::Ok();
}

void DevxService::NoteQueueCommand(ClientId c, devx::EntryPoint entry_point,
                                   std::span<const uint8_t> in, devx::ObjectHandle handle) {
  const uint16_t creator = devx::CreatorOpcodeOf(handle);
  if (creator != kCreateCqOpcode && creator != kCreateQpOpcode) return;
  if (entry_point != devx::EntryPoint::kObjCreate && entry_point != devx::EntryPoint::kObjModify) {
    return;
  }
  const auto object = firmware_.Lookup(handle);
  if (!object) return;
  const uint32_t number = devx::ObjectNumberOf(handle);
  if (entry_point == devx::EntryPoint::kObjCreate) {
    if (creator == kCreateCqOpcode) device_.DevxCqCreated(c, number, object->context);
    if (creator == kCreateQpOpcode) device_.DevxQpCreated(c, number, object->context);
  } else if (creator == kCreateQpOpcode) {
    device_.DevxQpModified(number, object->context);
  }
  (void)in;
}

void DevxService::QpEnteredError(uint32_t qpn) {
  firmware_.SetQpState(qpn, kQpcStateErr);
}

Verdict DevxService::UmemReg(ClientId c, const protocol::DevxUmemRegRequest& req,
                             protocol::DevxUmemRegReply* out) {
  if (verbs::MrRuleVerdict v = verbs::CheckUmemRegistration(req.addr, req.size, req.access);
      !v.ok()) {
    return Verdict::Fail(v.err, "umem_reg: " + v.why);
  }
  EnsureUid(c);
  *out = {objects_.RegisterUmem(c, req.addr, req.size, req.access), 0};
  return Verdict::Ok();
}

Verdict DevxService::UmemDereg(ClientId c, const protocol::DevxUmemDeregRequest& req) {
  const int err = objects_.DeregisterUmem(c, req.umem_id);
  if (err == ENOENT) return Verdict::Fail(EINVAL, "umem_dereg: no such UMEM in this context");
  if (err == EBUSY) return Verdict::Fail(EBUSY, "umem_dereg: a DEVX object still uses the UMEM");
  return Verdict::Ok();
}

void DevxService::RemoveClient(ClientId c) {
  device_.RemoveDevxQueues(c);  // the shadows go with the firmware's objects
  firmware_.DestroyAllOf(c);
  objects_.RemoveClient(c);
  handles_.erase(c);
  uids_.erase(c);
}

nlohmann::json DevxService::StatusJson(ClientId c) const {
  nlohmann::json objects = nlohmann::json::array();
  if (auto it = handles_.find(c); it != handles_.end()) {
    for (devx::ObjectHandle h : it->second) {
      objects.push_back({{"type", KindName(devx::CreatorOpcodeOf(h))},
                         {"number", devx::ObjectNumberOf(h)},
                         {"handle", h}});
    }
  }
  nlohmann::json umems = nlohmann::json::array();
  for (const auto& [id, umem] : objects_.umems()) {
    if (umem.owner == c) {
      umems.push_back({{"umem_id", id}, {"size", umem.size}, {"users", umem.users}});
    }
  }
  const devx::CallerContext caller = CallerOf(c);
  return {{"uid", caller.uid}, {"objects", objects}, {"umems", umems}};
}

// ---- Device's hooks (declared in device.h) --------------------------------------

// Defined here, where DevxService is a complete type.
void DevxServiceDeleter::operator()(DevxService* devx) const {
  delete devx;
}

DevxService& Device::devx() {
  if (!devx_) devx_.reset(new DevxService(*this));
  return *devx_;
}

void Device::ReleaseDevxObjects(ClientId c) {
  if (devx_) devx_->RemoveClient(c);
}

void Device::DevxQpEnteredError(uint32_t qpn) {
  if (devx_) devx_->QpEnteredError(qpn);
}

}  // namespace softverbs::daemon
