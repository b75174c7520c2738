// Message transport between the libraries and the daemon: SOCK_SEQPACKET Unix
// sockets (message boundaries kept, peer death seen as EOF) carrying file
// descriptors (memfds of shared rings and registered memory) as SCM_RIGHTS.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace softverbs {

inline constexpr size_t kMaxFdsPerMessage = 8;

// Sends one message made of up to two parts (header and body) and fds.
// Returns 0 or an errno.
int SendMessage(int sock, const void* part1, size_t len1, const void* part2, size_t len2,
                const int* fds = nullptr, size_t nfds = 0);

// Receives one message into buf. Returns the message length (0 on EOF) or
// -errno. Received fds are appended to *fds (closed if fds is null).
ssize_t ReceiveMessage(int sock, void* buf, size_t cap, std::vector<int>* fds);

// Connects a SEQPACKET socket to path; returns the fd or -errno.
int ConnectSeqpacket(const std::string& path);

// Creates a listening SEQPACKET socket at path (unlinking a stale one);
// returns the fd or -errno.
int ListenSeqpacket(const std::string& path);

// Credentials of the peer (SO_PEERCRED).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
};
int GetPeerCredentials(int sock, PeerCredentials* creds);

}  // namespace softverbs
