// Finding, and when needed starting, the user's softverbsd.
#pragma once

#include <string>

namespace softverbs {

// Connects to the daemon of the runtime directory (RuntimeDirPath()). When
// none answers and daemon_binary is not empty, starts it detached (its own
// session, no inherited descriptors, output to softverbsd.log in the runtime
// directory) and waits up to 5 s for it. Returns the connected fd or -errno,
// with an explanation in *why.
int ConnectToDaemon(const std::string& daemon_binary, std::string* why);

}  // namespace softverbs
