/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Test helper run inside bwrap: performs named syscall probes, prints "ok", "errno=NAME" or "killed=SIG". */

/*
 * Usage:
 *   try-syscall PROBE           run one probe in this process; print "ok", "errno=EPERM", …
 *                               (a filter that kills kills this process: the caller sees SIGSYS)
 *   try-syscall PROBE PROBE...  run each in a forked child; print "PROBE RESULT" per line, where
 *                               RESULT may also be "killed=SIGSYS"
 *   try-syscall --list          print every probe name
 * A probe's arguments are chosen so that the call would succeed, or fail with an errno of its own,
 * when nothing filters it; "unsupported" means the probe does not exist on this architecture.
 * Built without sanitizers (they make syscalls of their own) and linked against libc only.
 */

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/quota.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Numbers the build host's headers may not have yet. 467: every architecture with the unified
 * table (x86_64, i386, arm, aarch64, riscv, ppc, s390, …); see docs/seccomp.md. */
#if !defined(SYS_open_tree_attr) && (defined(__x86_64__) || defined(__aarch64__) || defined(__riscv))
#define SYS_open_tree_attr 467
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#define X32_SYSCALL_BIT 0x40000000L

#define UNSUPPORTED (-2)        /* probe result: no such syscall on this architecture */

typedef long (*ProbeFn)(void);

/* ------------------------------------------------------------------------------------------- */
/* Foreign ABIs */

#if defined(__x86_64__)
/* An i386 system call from a 64-bit process: "int $0x80" uses the 32-bit table (seccomp sees
 * AUDIT_ARCH_I386). r8-r11 are clobbered by old kernels. */
static long i386_syscall2(long nr, long a, long b) {
        long r;

        __asm__ volatile("int $0x80"
                         : "=a"(r)
                         : "a"(nr), "b"(a), "c"(b)
                         : "memory", "r8", "r9", "r10", "r11");
        if (r < 0 && r > -4096) {
                errno = (int) -r;
                return -1;
        }
        return r;
}

static long probe_i386_getpid(void) {
        return i386_syscall2(20, 0, 0);                 /* __NR_getpid in the i386 table */
}
static long probe_i386_unshare_newuser(void) {
        return i386_syscall2(310, CLONE_NEWUSER, 0);    /* __NR_unshare in the i386 table */
}
/* x32: the x86_64 entry point with __X32_SYSCALL_BIT set in the number. */
static long probe_x32_getpid(void) {
        return syscall(X32_SYSCALL_BIT | 39);
}
static long probe_x32_unshare_newuser(void) {
        return syscall(X32_SYSCALL_BIT | 272, CLONE_NEWUSER);
}
#else
static long probe_i386_getpid(void) {
        return UNSUPPORTED;
}
static long probe_i386_unshare_newuser(void) {
        return UNSUPPORTED;
}
static long probe_x32_getpid(void) {
        return UNSUPPORTED;
}
static long probe_x32_unshare_newuser(void) {
        return UNSUPPORTED;
}
#endif

/* ------------------------------------------------------------------------------------------- */
/* Helpers */

static long clone_flags(unsigned long flags) {
        long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
        int status;

        if (r == 0)
                _exit(0);               /* the child: no CLONE_VM, so this is a plain fork */
        if (r < 0)
                return -1;
        (void) waitpid((pid_t) r, &status, 0);
        return 0;
}

static long close_ret(long fd) {
        if (fd >= 0)
                (void) close((int) fd);
        return fd < 0 ? -1 : 0;
}

static long sock(int family, int type, int protocol) {
        return close_ret(syscall(SYS_socket, family, type, protocol));
}

static long sockpair(int family) {
        int sv[2];
        long r = syscall(SYS_socketpair, family, SOCK_STREAM, 0, sv);

        if (r == 0) {
                close(sv[0]);
                close(sv[1]);
        }
        return r;
}

static int self_pidfd(void) {
#ifdef SYS_pidfd_open
        return (int) syscall(SYS_pidfd_open, getpid(), 0);
#else
        errno = ENOSYS;
        return -1;
#endif
}

/* ------------------------------------------------------------------------------------------- */
/* Probes: one per denied entry of the profiles, plus controls that must stay allowed */

static long probe_getpid(void) {
        return syscall(SYS_getpid) > 0 ? 0 : -1;
}
static long probe_syslog(void) {
        return syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0) >= 0 ? 0 : -1;
}
static long probe_acct(void) {
        return syscall(SYS_acct, NULL);
}
static long probe_quotactl(void) {
        return syscall(SYS_quotactl, QCMD(Q_SYNC, USRQUOTA), NULL, 0, NULL);
}
static long probe_quotactl_fd(void) {
#ifdef SYS_quotactl_fd
        int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        long r = syscall(SYS_quotactl_fd, fd, QCMD(Q_SYNC, USRQUOTA), 0, NULL);
        int e = errno;

        close(fd);
        errno = e;
        return r;
#else
        return UNSUPPORTED;
#endif
}
static long probe_add_key(void) {
        return syscall(SYS_add_key, "user", "sr-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING) >= 0 ? 0 : -1;
}
static long probe_keyctl(void) {
        return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0) >= 0 ? 0 : -1;
}
static long probe_request_key(void) {
        return syscall(SYS_request_key, "user", "sr-probe-absent", NULL, 0) >= 0 ? 0 : -1;
}

static void *one_page(void) {
        static void *page;

        if (!page)
                page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return page;
}
static long probe_mbind(void) {
        return syscall(SYS_mbind, one_page(), 4096, 0 /* MPOL_DEFAULT */, NULL, 0, 0);
}
static long probe_get_mempolicy(void) {
        int mode;
        return syscall(SYS_get_mempolicy, &mode, NULL, 0, NULL, 0);
}
static long probe_set_mempolicy(void) {
        return syscall(SYS_set_mempolicy, 0 /* MPOL_DEFAULT */, NULL, 0);
}
static long probe_set_mempolicy_home_node(void) {
#ifdef SYS_set_mempolicy_home_node
        return syscall(SYS_set_mempolicy_home_node, (unsigned long) one_page(), 4096, 0, 0);
#else
        return UNSUPPORTED;
#endif
}
static long probe_migrate_pages(void) {
        unsigned long nodes = 1;
        return syscall(SYS_migrate_pages, 0, 8 * sizeof(nodes), &nodes, &nodes) >= 0 ? 0 : -1;
}
static long probe_move_pages(void) {
        return syscall(SYS_move_pages, 0, 0, NULL, NULL, NULL, 0);
}

static long probe_unshare(void) {
        return syscall(SYS_unshare, CLONE_NEWUSER);
}
static long probe_setns(void) {
        int fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
        long r = syscall(SYS_setns, fd, CLONE_NEWUTS);
        int e = errno;

        close(fd);
        errno = e;
        return r;
}
static long probe_clone_plain(void) {
        return clone_flags(0);
}
static long probe_clone_newuser(void) {
        return clone_flags(CLONE_NEWUSER);
}
static long probe_clone_newns(void) {
        return clone_flags(CLONE_NEWNS);
}
static long probe_clone_newpid(void) {
        return clone_flags(CLONE_NEWPID);
}
static long probe_clone_newnet(void) {
        return clone_flags(CLONE_NEWNET);
}
static long probe_clone_newuts(void) {
        return clone_flags(CLONE_NEWUTS);
}
static long probe_clone_newipc(void) {
        return clone_flags(CLONE_NEWIPC);
}
static long probe_clone_newcgroup(void) {
        return clone_flags(CLONE_NEWCGROUP);
}
static long probe_clone_newuser_hibits(void) {
        /* flags are 64 bits wide for clone(): the masked rule must still see the bit */
        return clone_flags(CLONE_NEWUSER | (1UL << 40));
}
static long probe_clone3(void) {
#ifdef SYS_clone3
        uint64_t args[8] = {};          /* struct clone_args, version 0 */
        /* size 0: refused by the kernel with EINVAL before it creates anything */
        return syscall(SYS_clone3, args, 0);
#else
        return UNSUPPORTED;
#endif
}
static long probe_fork(void) {
        pid_t pid = fork();
        int status;

        if (pid == 0)
                _exit(0);
        if (pid < 0)
                return -1;
        (void) waitpid(pid, &status, 0);
        return 0;
}

static long probe_mount(void) {
        return syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, "");
}
static long probe_umount(void) {
#ifdef SYS_umount
        return syscall(SYS_umount, "/proc");
#else
        return UNSUPPORTED;
#endif
}
static long probe_umount2(void) {
        return syscall(SYS_umount2, "/proc", MNT_DETACH);
}
static long probe_pivot_root(void) {
        return syscall(SYS_pivot_root, ".", ".");
}
static long probe_chroot(void) {
        return syscall(SYS_chroot, "/");
}
static long probe_open_tree(void) {
#ifdef SYS_open_tree
        return close_ret(syscall(SYS_open_tree, AT_FDCWD, "/", 0));
#else
        return UNSUPPORTED;
#endif
}
static long probe_move_mount(void) {
#ifdef SYS_move_mount
        return syscall(SYS_move_mount, -1, "", AT_FDCWD, "/tmp", 0);
#else
        return UNSUPPORTED;
#endif
}
static long probe_fsopen(void) {
#ifdef SYS_fsopen
        return close_ret(syscall(SYS_fsopen, "tmpfs", 0));
#else
        return UNSUPPORTED;
#endif
}
static long probe_fsconfig(void) {
#ifdef SYS_fsconfig
        return syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0);
#else
        return UNSUPPORTED;
#endif
}
static long probe_fsmount(void) {
#ifdef SYS_fsmount
        return close_ret(syscall(SYS_fsmount, -1, 0, 0));
#else
        return UNSUPPORTED;
#endif
}
static long probe_fspick(void) {
#ifdef SYS_fspick
        return close_ret(syscall(SYS_fspick, AT_FDCWD, "/", 0));
#else
        return UNSUPPORTED;
#endif
}
static long probe_mount_setattr(void) {
#ifdef SYS_mount_setattr
        uint64_t attr[4] = {};          /* struct mount_attr */
        return syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, attr, sizeof(attr));
#else
        return UNSUPPORTED;
#endif
}
static long probe_open_tree_attr(void) {
#ifdef SYS_open_tree_attr
        return close_ret(syscall(SYS_open_tree_attr, AT_FDCWD, "/", 0, NULL, 0));
#else
        return UNSUPPORTED;
#endif
}

static long probe_io_uring_setup(void) {
        struct io_uring_params params = {};
        return close_ret(syscall(SYS_io_uring_setup, 1, &params));
}
static long probe_io_uring_enter(void) {
        return syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0);
}
static long probe_io_uring_register(void) {
        return syscall(SYS_io_uring_register, -1, 0, NULL, 0);
}

static long probe_ioctl_tiocsti(void) {
        char c = 'x';
        return syscall(SYS_ioctl, 0, (unsigned long) TIOCSTI, &c);
}
static long probe_ioctl_tiocsti_hibits(void) {
        char c = 'x';
        /* The kernel takes cmd as 32 bits: garbage above them must not get past the rule. */
        return syscall(SYS_ioctl, 0, (unsigned long) TIOCSTI | (1UL << 32), &c);
}
static long probe_ioctl_tioclinux(void) {
        char subcode = 12;      /* TIOCL_GETSHIFTSTATE */
        return syscall(SYS_ioctl, 0, (unsigned long) TIOCLINUX, &subcode);
}
static long probe_ioctl_tiocsetd(void) {
        int ldisc = 0;          /* N_TTY */
        return syscall(SYS_ioctl, 0, (unsigned long) TIOCSETD, &ldisc);
}
static long probe_ioctl_fionread(void) {
        int n;
        int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        long r = syscall(SYS_ioctl, fd, (unsigned long) FIONREAD, &n);
        int e = errno;

        close(fd);
        errno = e;
        return r;
}
static long probe_vhangup(void) {
        return syscall(SYS_vhangup);
}

static long probe_ptrace(void) {
        return syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, NULL, NULL);
}
static long probe_process_vm_readv(void) {
        char src[8] = "abcdefg", dst[8];
        struct iovec l = { dst, sizeof(dst) }, r = { src, sizeof(src) };
        return syscall(SYS_process_vm_readv, getpid(), &l, 1, &r, 1, 0) >= 0 ? 0 : -1;
}
static long probe_process_vm_writev(void) {
        char src[8] = "abcdefg", dst[8];
        struct iovec l = { src, sizeof(src) }, r = { dst, sizeof(dst) };
        return syscall(SYS_process_vm_writev, getpid(), &l, 1, &r, 1, 0) >= 0 ? 0 : -1;
}
static long probe_process_madvise(void) {
#ifdef SYS_process_madvise
        struct iovec v = { one_page(), 4096 };
        int fd = self_pidfd();
        long r = syscall(SYS_process_madvise, fd, &v, 1, MADV_COLD, 0);
        int e = errno;

        if (fd >= 0)
                close(fd);
        errno = e;
        return r >= 0 ? 0 : -1;
#else
        return UNSUPPORTED;
#endif
}
static long probe_pidfd_getfd(void) {
#ifdef SYS_pidfd_getfd
        int fd = self_pidfd();
        long r = syscall(SYS_pidfd_getfd, fd, 0, 0);
        int e = errno;

        if (fd >= 0)
                close(fd);
        errno = e;
        return close_ret(r);
#else
        return UNSUPPORTED;
#endif
}
static long probe_kcmp(void) {
        return syscall(SYS_kcmp, getpid(), getpid(), 0 /* KCMP_FILE */, 0, 0) >= 0 ? 0 : -1;
}
static long probe_perf_event_open(void) {
        struct perf_event_attr a = {
                .type = PERF_TYPE_SOFTWARE,
                .size = sizeof(a),
                .config = PERF_COUNT_SW_TASK_CLOCK,
                .exclude_kernel = 1,
                .exclude_hv = 1,
        };
        return close_ret(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
}
static long probe_bpf(void) {
        union bpf_attr a = {
                .map_type = BPF_MAP_TYPE_ARRAY,
                .key_size = 4,
                .value_size = 4,
                .max_entries = 1,
        };
        return close_ret(syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a)));
}
static long probe_userfaultfd(void) {
        return close_ret(syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
}

static long probe_personality_linux(void) {
        return syscall(SYS_personality, PER_LINUX) >= 0 ? 0 : -1;
}
static long probe_personality_addr_no_randomize(void) {
        return syscall(SYS_personality, PER_LINUX | ADDR_NO_RANDOMIZE) >= 0 ? 0 : -1;
}
static long probe_personality_linux32(void) {
        return syscall(SYS_personality, PER_LINUX32) >= 0 ? 0 : -1;
}
static long probe_personality_query(void) {
        return syscall(SYS_personality, 0xffffffffUL) >= 0 ? 0 : -1;
}

static long probe_init_module(void) {
        return syscall(SYS_init_module, NULL, 0, "");
}
static long probe_finit_module(void) {
        return syscall(SYS_finit_module, -1, "", 0);
}
static long probe_delete_module(void) {
        return syscall(SYS_delete_module, "sr_probe_absent", O_NONBLOCK);
}
static long probe_kexec_load(void) {
#ifdef SYS_kexec_load
        return syscall(SYS_kexec_load, 0, 0, NULL, 0);
#else
        return UNSUPPORTED;
#endif
}
static long probe_kexec_file_load(void) {
#ifdef SYS_kexec_file_load
        return syscall(SYS_kexec_file_load, -1, -1, 1, "", 0);
#else
        return UNSUPPORTED;
#endif
}
static long probe_reboot(void) {
        return syscall(SYS_reboot, 0, 0, 0, NULL);     /* bad magic: EINVAL when allowed */
}
static long probe_swapon(void) {
        return syscall(SYS_swapon, "/sr-probe-absent", 0);
}
static long probe_swapoff(void) {
        return syscall(SYS_swapoff, "/sr-probe-absent");
}
static long probe_iopl(void) {
#ifdef SYS_iopl
        return syscall(SYS_iopl, 0);
#else
        return UNSUPPORTED;
#endif
}
static long probe_ioperm(void) {
#ifdef SYS_ioperm
        return syscall(SYS_ioperm, 0x80, 1, 0);
#else
        return UNSUPPORTED;
#endif
}
static long probe_modify_ldt(void) {
#ifdef SYS_modify_ldt
        char buf[16];
        return syscall(SYS_modify_ldt, 0, buf, sizeof(buf)) >= 0 ? 0 : -1;
#else
        return UNSUPPORTED;
#endif
}

static long probe_settimeofday(void) {
        return syscall(SYS_settimeofday, NULL, NULL);
}
static long probe_clock_settime(void) {
        struct timespec ts = {};
        return syscall(SYS_clock_settime, CLOCK_MONOTONIC, &ts);
}
static long probe_clock_adjtime(void) {
        struct timex tx = {};
        return syscall(SYS_clock_adjtime, CLOCK_REALTIME, &tx) >= 0 ? 0 : -1;
}
static long probe_adjtimex(void) {
        struct timex tx = {};
        return syscall(SYS_adjtimex, &tx) >= 0 ? 0 : -1;
}
static long probe_sethostname(void) {
        return syscall(SYS_sethostname, "sandbox", 7);
}
static long probe_setdomainname(void) {
        return syscall(SYS_setdomainname, "sandbox", 7);
}

static long probe_open_by_handle_at(void) {
        struct {
                unsigned handle_bytes;
                int handle_type;
                unsigned char f_handle[128];
        } h = { .handle_bytes = 8 };
        return close_ret(syscall(SYS_open_by_handle_at, AT_FDCWD, &h, O_RDONLY));
}
static long probe_name_to_handle_at(void) {
        struct {
                unsigned handle_bytes;
                int handle_type;
                unsigned char f_handle[128];
        } h = { .handle_bytes = 128 };
        int mount_id;
        return syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &h, &mount_id, 0);
}

static long probe_uselib(void) {
#ifdef SYS_uselib
        return syscall(SYS_uselib, "/sr-probe-absent");
#else
        return UNSUPPORTED;
#endif
}
static long probe_lookup_dcookie(void) {
#ifdef SYS_lookup_dcookie
        char buf[64];
        return syscall(SYS_lookup_dcookie, 0, buf, sizeof(buf));
#else
        return UNSUPPORTED;
#endif
}
static long probe_nfsservctl(void) {
#ifdef SYS_nfsservctl
        return syscall(SYS_nfsservctl, 0, NULL, NULL);
#else
        return UNSUPPORTED;
#endif
}
static long probe_fanotify_init(void) {
        return close_ret(syscall(SYS_fanotify_init, FAN_CLASS_NOTIF | FAN_REPORT_FID, O_RDONLY));
}

/* Sockets */
static long probe_socket_unix(void) {
        return sock(AF_UNIX, SOCK_STREAM, 0);
}
static long probe_socket_unix_hibits(void) {
        /* family is an int for the kernel; the 64-bit rule refuses garbage above it (harmless) */
        return close_ret(syscall(SYS_socket, (long) AF_UNIX | (1L << 32), SOCK_STREAM, 0));
}
static long probe_socket_unspec(void) {
        return sock(AF_UNSPEC, SOCK_STREAM, 0);
}
static long probe_socket_netlink_route(void) {
        return sock(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0 /* NETLINK_ROUTE */);
}
static long probe_socket_netlink_generic(void) {
        return sock(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 16 /* NETLINK_GENERIC */);
}
static long probe_socket_netlink_netfilter(void) {
        return sock(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 12 /* NETLINK_NETFILTER */);
}
static long probe_socket_netlink_sock_diag(void) {
        return sock(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 4 /* NETLINK_SOCK_DIAG */);
}
static long probe_socket_inet_stream(void) {
        return sock(AF_INET, SOCK_STREAM, 0);
}
static long probe_socket_inet_stream_tcp(void) {
        return sock(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
}
static long probe_socket_inet_dgram(void) {
        return sock(AF_INET, SOCK_DGRAM, 0);
}
static long probe_socket_inet6_stream(void) {
        return sock(AF_INET6, SOCK_STREAM, 0);
}
static long probe_socket_inet6_dgram(void) {
        return sock(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
}
static long probe_socket_inet_raw(void) {
        return sock(AF_INET, SOCK_RAW, IPPROTO_UDP);
}
static long probe_socket_inet_raw_icmp(void) {
        /* matches the type and the protocol rules of the network variant: either errno */
        return sock(AF_INET, SOCK_RAW, IPPROTO_ICMP);
}
static long probe_socket_inet_raw_flags(void) {
        return sock(AF_INET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
}
static long probe_socket_inet6_raw(void) {
        return sock(AF_INET6, SOCK_RAW, IPPROTO_UDP);
}
static long probe_socket_inet_packet(void) {
        return sock(AF_INET, SOCK_PACKET, 0);
}
static long probe_socket_inet_seqpacket(void) {
        return sock(AF_INET, SOCK_SEQPACKET, 0);
}
static long probe_socket_inet6_seqpacket(void) {
        return sock(AF_INET6, SOCK_SEQPACKET, 0);
}
static long probe_socket_inet_sctp(void) {
        return sock(AF_INET, SOCK_STREAM, IPPROTO_SCTP);
}
static long probe_socket_inet6_sctp(void) {
        return sock(AF_INET6, SOCK_STREAM, IPPROTO_SCTP);
}
static long probe_socket_inet_mptcp(void) {
        return sock(AF_INET, SOCK_STREAM, IPPROTO_MPTCP);
}
static long probe_socket_inet_udplite(void) {
        return sock(AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE);
}
static long probe_socket_inet_icmp(void) {
        return sock(AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
}
static long probe_socket_inet6_icmp(void) {
        return sock(AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6);
}
static long probe_socket_inet_l2tp(void) {
        return sock(AF_INET, SOCK_DGRAM, 115 /* IPPROTO_L2TP */);
}
static long probe_socket_packet(void) {
        return sock(AF_PACKET, SOCK_RAW, 0x0300 /* htons(ETH_P_ALL) */);
}
static long probe_socket_vsock(void) {
        return sock(AF_VSOCK, SOCK_STREAM, 0);
}
static long probe_socket_alg(void) {
        return sock(AF_ALG, SOCK_SEQPACKET, 0);
}
static long probe_socket_key(void) {
        return sock(AF_KEY, SOCK_RAW, 2 /* PF_KEY_V2 */);
}
static long probe_socket_family_200(void) {
        return sock(200, SOCK_STREAM, 0);
}
static long probe_socketpair_unix(void) {
        return sockpair(AF_UNIX);
}
static long probe_socketpair_inet(void) {
        return sockpair(AF_INET);
}
static long probe_socketpair_packet(void) {
        return sockpair(AF_PACKET);
}
static long probe_tcp_loopback(void) {
        /* A TCP connection over the sandbox's own loopback: what R's PSOCK clusters, Jupyter
         * kernels and torch.distributed rendezvous do. */
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t l = sizeof(a);
        int s = -1, c = -1, e;
        long r = -1;

        s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return -1;
        if (bind(s, (struct sockaddr *) &a, sizeof(a)) < 0 || listen(s, 1) < 0 ||
            getsockname(s, (struct sockaddr *) &a, &l) < 0)
                goto out;
        c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c < 0 || connect(c, (struct sockaddr *) &a, sizeof(a)) < 0)
                goto out;
        r = 0;
out:
        e = errno;
        if (c >= 0)
                close(c);
        close(s);
        errno = e;
        return r;
}

#define P(name, fn) { name, fn }
static const struct {
        const char *name;
        ProbeFn fn;
} probes[] = {
        P("getpid", probe_getpid),
        P("fork", probe_fork),
        P("i386-getpid", probe_i386_getpid),
        P("i386-unshare-newuser", probe_i386_unshare_newuser),
        P("x32-getpid", probe_x32_getpid),
        P("x32-unshare-newuser", probe_x32_unshare_newuser),
        P("syslog", probe_syslog),
        P("acct", probe_acct),
        P("quotactl", probe_quotactl),
        P("quotactl_fd", probe_quotactl_fd),
        P("add_key", probe_add_key),
        P("keyctl", probe_keyctl),
        P("request_key", probe_request_key),
        P("mbind", probe_mbind),
        P("get_mempolicy", probe_get_mempolicy),
        P("set_mempolicy", probe_set_mempolicy),
        P("set_mempolicy_home_node", probe_set_mempolicy_home_node),
        P("migrate_pages", probe_migrate_pages),
        P("move_pages", probe_move_pages),
        P("unshare", probe_unshare),
        P("setns", probe_setns),
        P("clone-plain", probe_clone_plain),
        P("clone-newuser", probe_clone_newuser),
        P("clone-newuser-hibits", probe_clone_newuser_hibits),
        P("clone-newns", probe_clone_newns),
        P("clone-newpid", probe_clone_newpid),
        P("clone-newnet", probe_clone_newnet),
        P("clone-newuts", probe_clone_newuts),
        P("clone-newipc", probe_clone_newipc),
        P("clone-newcgroup", probe_clone_newcgroup),
        P("clone3", probe_clone3),
        P("mount", probe_mount),
        P("umount", probe_umount),
        P("umount2", probe_umount2),
        P("pivot_root", probe_pivot_root),
        P("chroot", probe_chroot),
        P("open_tree", probe_open_tree),
        P("move_mount", probe_move_mount),
        P("fsopen", probe_fsopen),
        P("fsconfig", probe_fsconfig),
        P("fsmount", probe_fsmount),
        P("fspick", probe_fspick),
        P("mount_setattr", probe_mount_setattr),
        P("open_tree_attr", probe_open_tree_attr),
        P("io_uring_setup", probe_io_uring_setup),
        P("io_uring_enter", probe_io_uring_enter),
        P("io_uring_register", probe_io_uring_register),
        P("ioctl-tiocsti", probe_ioctl_tiocsti),
        P("ioctl-tiocsti-hibits", probe_ioctl_tiocsti_hibits),
        P("ioctl-tioclinux", probe_ioctl_tioclinux),
        P("ioctl-tiocsetd", probe_ioctl_tiocsetd),
        P("ioctl-fionread", probe_ioctl_fionread),
        P("vhangup", probe_vhangup),
        P("ptrace", probe_ptrace),
        P("process_vm_readv", probe_process_vm_readv),
        P("process_vm_writev", probe_process_vm_writev),
        P("process_madvise", probe_process_madvise),
        P("pidfd_getfd", probe_pidfd_getfd),
        P("kcmp", probe_kcmp),
        P("perf_event_open", probe_perf_event_open),
        P("bpf", probe_bpf),
        P("userfaultfd", probe_userfaultfd),
        P("personality-linux", probe_personality_linux),
        P("personality-addr-no-randomize", probe_personality_addr_no_randomize),
        P("personality-linux32", probe_personality_linux32),
        P("personality-query", probe_personality_query),
        P("init_module", probe_init_module),
        P("finit_module", probe_finit_module),
        P("delete_module", probe_delete_module),
        P("kexec_load", probe_kexec_load),
        P("kexec_file_load", probe_kexec_file_load),
        P("reboot", probe_reboot),
        P("swapon", probe_swapon),
        P("swapoff", probe_swapoff),
        P("iopl", probe_iopl),
        P("ioperm", probe_ioperm),
        P("modify_ldt", probe_modify_ldt),
        P("settimeofday", probe_settimeofday),
        P("clock_settime", probe_clock_settime),
        P("clock_adjtime", probe_clock_adjtime),
        P("adjtimex", probe_adjtimex),
        P("sethostname", probe_sethostname),
        P("setdomainname", probe_setdomainname),
        P("open_by_handle_at", probe_open_by_handle_at),
        P("name_to_handle_at", probe_name_to_handle_at),
        P("uselib", probe_uselib),
        P("lookup_dcookie", probe_lookup_dcookie),
        P("nfsservctl", probe_nfsservctl),
        P("fanotify_init", probe_fanotify_init),
        P("socket-unix", probe_socket_unix),
        P("socket-unix-hibits", probe_socket_unix_hibits),
        P("socket-unspec", probe_socket_unspec),
        P("socket-netlink-route", probe_socket_netlink_route),
        P("socket-netlink-generic", probe_socket_netlink_generic),
        P("socket-netlink-netfilter", probe_socket_netlink_netfilter),
        P("socket-netlink-sock-diag", probe_socket_netlink_sock_diag),
        P("socket-inet-stream", probe_socket_inet_stream),
        P("socket-inet-stream-tcp", probe_socket_inet_stream_tcp),
        P("socket-inet-dgram", probe_socket_inet_dgram),
        P("socket-inet6-stream", probe_socket_inet6_stream),
        P("socket-inet6-dgram", probe_socket_inet6_dgram),
        P("socket-inet-raw", probe_socket_inet_raw),
        P("socket-inet-raw-icmp", probe_socket_inet_raw_icmp),
        P("socket-inet-raw-flags", probe_socket_inet_raw_flags),
        P("socket-inet6-raw", probe_socket_inet6_raw),
        P("socket-inet-packet", probe_socket_inet_packet),
        P("socket-inet-seqpacket", probe_socket_inet_seqpacket),
        P("socket-inet6-seqpacket", probe_socket_inet6_seqpacket),
        P("socket-inet-sctp", probe_socket_inet_sctp),
        P("socket-inet6-sctp", probe_socket_inet6_sctp),
        P("socket-inet-mptcp", probe_socket_inet_mptcp),
        P("socket-inet-udplite", probe_socket_inet_udplite),
        P("socket-inet-icmp", probe_socket_inet_icmp),
        P("socket-inet6-icmp", probe_socket_inet6_icmp),
        P("socket-inet-l2tp", probe_socket_inet_l2tp),
        P("socket-packet", probe_socket_packet),
        P("socket-vsock", probe_socket_vsock),
        P("socket-alg", probe_socket_alg),
        P("socket-key", probe_socket_key),
        P("socket-family-200", probe_socket_family_200),
        P("socketpair-unix", probe_socketpair_unix),
        P("socketpair-inet", probe_socketpair_inet),
        P("socketpair-packet", probe_socketpair_packet),
        P("tcp-loopback", probe_tcp_loopback),
};
#undef P

static const char *errno_to_name(int e) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
        const char *n = strerrorname_np(e);
        if (n)
                return n;
#endif
        switch (e) {
        case EPERM: return "EPERM";
        case ENOSYS: return "ENOSYS";
        case EAFNOSUPPORT: return "EAFNOSUPPORT";
        case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
        case ENOTRECOVERABLE: return "ENOTRECOVERABLE";
        default: return NULL;
        }
}

static const char *signal_to_name(int sig) {
        switch (sig) {
        case SIGSYS: return "SIGSYS";
        case SIGKILL: return "SIGKILL";
        case SIGSEGV: return "SIGSEGV";
        case SIGILL: return "SIGILL";
        case SIGBUS: return "SIGBUS";
        case SIGABRT: return "SIGABRT";
        default: return NULL;
        }
}

/* Format the outcome of one probe call into @buf. */
static void format_result(long r, int e, char *buf, size_t size) {
        const char *n;

        if (r == UNSUPPORTED)
                snprintf(buf, size, "unsupported");
        else if (r >= 0)
                snprintf(buf, size, "ok");
        else if ((n = errno_to_name(e)))
                snprintf(buf, size, "errno=%s", n);
        else
                snprintf(buf, size, "errno=%d", e);
}

static ProbeFn find_probe(const char *name) {
        for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
                if (strcmp(probes[i].name, name) == 0)
                        return probes[i].fn;
        return NULL;
}

/* Run one probe in a child, so that a probe that gets through cannot change the next one's
 * conditions and a killed probe does not end the run. */
static void run_forked(const char *name) {
        ProbeFn fn = find_probe(name);
        char buf[64];
        int pipefd[2], status;
        pid_t pid;
        ssize_t k;

        if (!fn) {
                printf("%s unknown-probe\n", name);
                return;
        }
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
                printf("%s harness-error=pipe\n", name);
                return;
        }
        fflush(stdout);
        pid = fork();
        if (pid < 0) {
                printf("%s harness-error=fork\n", name);
                close(pipefd[0]);
                close(pipefd[1]);
                return;
        }
        if (pid == 0) {
                long r;
                int e;

                close(pipefd[0]);
                errno = 0;
                r = fn();
                e = errno;
                format_result(r, e, buf, sizeof(buf));
                (void) !write(pipefd[1], buf, strlen(buf));
                _exit(0);
        }
        close(pipefd[1]);
        k = read(pipefd[0], buf, sizeof(buf) - 1);
        close(pipefd[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (WIFSIGNALED(status)) {
                const char *s = signal_to_name(WTERMSIG(status));
                if (s)
                        printf("%s killed=%s\n", name, s);
                else
                        printf("%s killed=%d\n", name, WTERMSIG(status));
        } else if (k > 0) {
                buf[k] = '\0';
                printf("%s %s\n", name, buf);
        } else
                printf("%s harness-error=no-result\n", name);
}

int main(int argc, char *argv[]) {
        if (argc < 2) {
                fprintf(stderr, "usage: try-syscall PROBE... | --list\n");
                return 2;
        }
        if (strcmp(argv[1], "--list") == 0) {
                for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
                        printf("%s\n", probes[i].name);
                return 0;
        }
        if (argc == 2) {
                ProbeFn fn = find_probe(argv[1]);
                char buf[64];
                long r;
                int e;

                if (!fn) {
                        fprintf(stderr, "unknown probe '%s'\n", argv[1]);
                        return 2;
                }
                errno = 0;
                r = fn();
                e = errno;
                format_result(r, e, buf, sizeof(buf));
                printf("%s\n", buf);
                return 0;
        }
        for (int i = 1; i < argc; i++)
                run_forked(argv[i]);
        return fflush(stdout) == 0 ? 0 : 1;
}
