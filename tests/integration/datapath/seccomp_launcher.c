/* Runs a program under a seccomp filter that denies what Docker's default
 * profile denies and softverbs must never need: process_vm_readv,
 * process_vm_writev and ptrace fail with EPERM. With --deny-userfaultfd,
 * userfaultfd too (a profile may deny it: registration then holds no
 * writes, docs/datapath.md). With --deny-tcp, making a TCP socket
 * (socket(2) of AF_INET or AF_INET6 with SOCK_STREAM): a program whose
 * stream sockets must be rsockets (Debian's librspreload falls back to a
 * real socket where rsocket() fails) cannot go over TCP unseen.
 * usage: dp_seccomp_launcher [--deny-userfaultfd] [--deny-tcp] PROGRAM ARGS... */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* socket(family, SOCK_STREAM | any flags, any protocol) fails with EPERM. */
static int DenyTcp(scmp_filter_ctx ctx, int family) {
  return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
                          SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)family),
                          SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_STREAM));
}

int main(int argc, char** argv) {
  int deny_userfaultfd = 0, deny_tcp = 0, fail_second_mib = 0;
  while (argc > 1 && strncmp(argv[1], "--", 2) == 0) {
    if (strcmp(argv[1], "--fail-second-mib-writes") == 0) {
      fail_second_mib = 1;
    } else if (strcmp(argv[1], "--deny-userfaultfd") == 0) {
      deny_userfaultfd = 1;
    } else if (strcmp(argv[1], "--deny-tcp") == 0) {
      deny_tcp = 1;
    } else {
      fprintf(stderr, "unknown option %s\n", argv[1]);
      return 2;
    }
    --argc;
    ++argv;
  }
  if (argc < 2) {
    fprintf(stderr,
            "usage: %s [--deny-userfaultfd] [--deny-tcp] [--fail-second-mib-writes] PROGRAM "
            "ARGS...\n",
            argv[0]);
    return 2;
  }
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(process_vm_readv), 0) ||
      seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(process_vm_writev), 0) ||
      seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ptrace), 0) ||
      (deny_userfaultfd &&
       seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(userfaultfd), 0)) ||
      (deny_tcp && (DenyTcp(ctx, AF_INET) || DenyTcp(ctx, AF_INET6))) ||
      (fail_second_mib &&
       seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSPC), SCMP_SYS(pwrite64), 1,
                        SCMP_A3(SCMP_CMP_MASKED_EQ, ~(scmp_datum_t)0xfffff, 1u << 20))) ||
      seccomp_load(ctx)) {
    fprintf(stderr, "cannot install the seccomp filter\n");
    return 2;
  }
  seccomp_release(ctx);
  const int families[] = {AF_INET, AF_INET6};
  for (int i = 0; deny_tcp && i < 2; ++i) {
    if (socket(families[i], SOCK_STREAM | SOCK_CLOEXEC, 0) >= 0 || errno != EPERM) {
      fprintf(stderr, "the filter lets a TCP socket be made\n");
      return 2;
    }
  }
  execvp(argv[1], argv + 1);
  perror("execvp");
  return 127;
}
