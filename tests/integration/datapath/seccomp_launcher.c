/* Runs a program under a seccomp filter that denies what Docker's default
 * profile denies and softverbs must never need: process_vm_readv,
 * process_vm_writev and ptrace fail with EPERM. With --deny-userfaultfd,
 * userfaultfd too (a profile may deny it: registration then holds no
 * writes, docs/datapath.md).
 * usage: dp_seccomp_launcher [--deny-userfaultfd] PROGRAM ARGS... */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  const int deny_userfaultfd = argc > 1 && strcmp(argv[1], "--deny-userfaultfd") == 0;
  if (deny_userfaultfd) {
    --argc;
    ++argv;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: %s [--deny-userfaultfd] PROGRAM ARGS...\n", argv[0]);
    return 2;
  }
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(process_vm_readv), 0) ||
      seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(process_vm_writev), 0) ||
      seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ptrace), 0) ||
      (deny_userfaultfd &&
       seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(userfaultfd), 0)) ||
      seccomp_load(ctx)) {
    fprintf(stderr, "cannot install the seccomp filter\n");
    return 2;
  }
  seccomp_release(ctx);
  execvp(argv[1], argv + 1);
  perror("execvp");
  return 127;
}
