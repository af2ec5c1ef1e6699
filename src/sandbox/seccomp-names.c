/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The symbolic names a profile may use: constants (CLONE_NEW*, TIOCSTI, AF_*, SOCK_*, IPPROTO_*,
 * NETLINK_*, personalities) with their values from the build's own headers, the errnos a rule may
 * return, and libseccomp's architecture names for messages. Pure tables and lookups; calls only
 * libseccomp's name resolution.
 */

#include <linux/netlink.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>

#include "sandbox/seccomp-profile-internal.h"
#include "util/macro.h"

/* ---------------------------------------------------------------------------------------------
 * Symbolic names. Values come from the build's own headers, i.e. the native ABI, which is the only
 * one the compiled filter lets through (TIOCSTI, for one, differs between architectures).
 */

#define SOCK_TYPE_MASK 0xf      /* include/linux/net.h; not exported to user space */

#define C(x) { #x, (uint64_t) (x) }
static const Constant constant_table[] = {
        C(CLONE_NEWNS), C(CLONE_NEWCGROUP), C(CLONE_NEWUTS), C(CLONE_NEWIPC), C(CLONE_NEWUSER),
        C(CLONE_NEWPID), C(CLONE_NEWNET),
#ifdef CLONE_NEWTIME
        C(CLONE_NEWTIME),
#endif
        C(TIOCSTI), C(TIOCLINUX), C(TIOCSETD),
        C(PER_LINUX), C(PER_LINUX32), C(ADDR_NO_RANDOMIZE), C(READ_IMPLIES_EXEC), C(UNAME26),
        C(AF_UNSPEC), C(AF_UNIX), C(AF_LOCAL), C(AF_INET), C(AF_AX25), C(AF_IPX), C(AF_APPLETALK),
        C(AF_NETROM), C(AF_BRIDGE), C(AF_ATMPVC), C(AF_X25), C(AF_INET6), C(AF_ROSE), C(AF_DECnet),
        C(AF_NETBEUI), C(AF_SECURITY), C(AF_KEY), C(AF_NETLINK), C(AF_ROUTE), C(AF_PACKET), C(AF_ASH),
        C(AF_ECONET), C(AF_ATMSVC), C(AF_RDS), C(AF_SNA), C(AF_IRDA), C(AF_PPPOX), C(AF_WANPIPE),
        C(AF_LLC), C(AF_IB), C(AF_MPLS), C(AF_CAN), C(AF_TIPC), C(AF_BLUETOOTH), C(AF_IUCV),
        C(AF_RXRPC), C(AF_ISDN), C(AF_PHONET), C(AF_IEEE802154), C(AF_CAIF), C(AF_ALG), C(AF_NFC),
        C(AF_VSOCK), C(AF_KCM), C(AF_QIPCRTR), C(AF_SMC),
#ifdef AF_XDP
        C(AF_XDP),
#endif
#ifdef AF_MCTP
        C(AF_MCTP),
#endif
        C(SOCK_STREAM), C(SOCK_DGRAM), C(SOCK_RAW), C(SOCK_RDM), C(SOCK_SEQPACKET), C(SOCK_DCCP),
        C(SOCK_PACKET), C(SOCK_TYPE_MASK), C(SOCK_NONBLOCK), C(SOCK_CLOEXEC),
        C(IPPROTO_IP), C(IPPROTO_ICMP), C(IPPROTO_TCP), C(IPPROTO_UDP), C(IPPROTO_IPV6),
        C(IPPROTO_ICMPV6), C(IPPROTO_SCTP), C(IPPROTO_UDPLITE), C(IPPROTO_RAW),
#ifdef IPPROTO_MPTCP
        C(IPPROTO_MPTCP),
#endif
        C(NETLINK_ROUTE), C(NETLINK_USERSOCK), C(NETLINK_FIREWALL), C(NETLINK_SOCK_DIAG),
        C(NETLINK_NFLOG), C(NETLINK_XFRM), C(NETLINK_SELINUX), C(NETLINK_ISCSI), C(NETLINK_AUDIT),
        C(NETLINK_FIB_LOOKUP), C(NETLINK_CONNECTOR), C(NETLINK_NETFILTER), C(NETLINK_IP6_FW),
        C(NETLINK_DNRTMSG), C(NETLINK_KOBJECT_UEVENT), C(NETLINK_GENERIC), C(NETLINK_SCSITRANSPORT),
        C(NETLINK_ECRYPTFS), C(NETLINK_RDMA), C(NETLINK_CRYPTO),
};

/* The errnos a rule may return. Names only: a typo must not silently become another number. */
static const Constant errno_table[] = {
        C(EPERM), C(ENOENT), C(EIO), C(ENXIO), C(EACCES), C(EFAULT), C(EBUSY), C(EEXIST), C(ENODEV),
        C(EINVAL), C(ENOTTY), C(ENOSYS), C(EOPNOTSUPP), C(EAFNOSUPPORT), C(EPFNOSUPPORT),
        C(EPROTONOSUPPORT), C(ESOCKTNOSUPPORT), C(ENOTRECOVERABLE),
};
#undef C

static const Constant *constant_lookup(const Constant *table, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (streq(table[i].name, name))
                        return table + i;
        return NULL;
}

const Constant *profile_constant_lookup(const char *name) {
        return constant_lookup(constant_table, ELEMENTSOF(constant_table), name);
}

const Constant *profile_errno_lookup(const char *name) {
        return constant_lookup(errno_table, ELEMENTSOF(errno_table), name);
}

const char *profile_errno_name(int errnum) {
        for (size_t i = 0; i < ELEMENTSOF(errno_table); i++)
                if (errno_table[i].value == (uint64_t) errnum)
                        return errno_table[i].name;
        return NULL;
}

/* Architecture names as libseccomp spells them, for messages (libseccomp has no token → name). */
static const char *const arch_names[] = {
        "x86", "x86_64", "x32", "arm", "aarch64", "mips", "mips64", "mips64n32", "mipsel", "mipsel64",
        "mipsel64n32", "ppc", "ppc64", "ppc64le", "s390", "s390x", "parisc", "parisc64", "riscv64",
};

const char *profile_arch_name(uint32_t token) {
        for (size_t i = 0; i < ELEMENTSOF(arch_names); i++)
                if (seccomp_arch_resolve_name(arch_names[i]) == token)
                        return arch_names[i];
        return "unknown";
}
