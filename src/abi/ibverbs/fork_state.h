// What the fork support (fork.cc) needs to hear from the rest of the
// library.
#pragma once

namespace softverbs::provider {

// A range is being registered: from now on ibv_fork_init is too late
// (EINVAL), as in rdma-core, unless it was called before.
void NoteRangeRegistered();

// ibv_fork_init if RDMAV_FORK_SAFE or IBV_FORK_SAFE asks for it (rdma-core's
// ibverbs_init, at the first read of the device list).
void ForkInitFromEnvironment();

}  // namespace softverbs::provider
