// What a daemon operation answers: 0 or a positive errno, and for a rejection
// the rule that was broken, in words (sent back to the library, which prints it
// on the log channel).
#pragma once

#include <string>

namespace softverbs::daemon {

struct Verdict {
  int err = 0;
  std::string why;

  static Verdict Ok() { return {}; }
  static Verdict Fail(int err, std::string why) { return {err, std::move(why)}; }
  bool ok() const { return err == 0; }
};

}  // namespace softverbs::daemon
