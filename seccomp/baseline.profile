# SPDX-License-Identifier: LGPL-2.1-or-later
#
# baseline: the seccomp profile of every sandbox. Default action ALLOW; only the native ABI is
# filtered and every other one (i386 "int 0x80", x32, 32-bit arm) is KILL_PROCESS.
# Format (docs/seccomp.md):
#   deny SYSCALL [if COND [and COND]...] [unless ARG in VALUE...] ERRNO   # why
#   deny-number NAME ARCH=NR... [if ...] ERRNO                            # why
#   allow-socket-families AF_...                                          # why
#   include PROFILE
#   architectures ARCH...                                                 # native ABIs it is written for
# COND is "A<n> == V", "A<n> != V", "A<n> & MASK == V" or "A<n> & BIT"; ARG is "A<n>" or
# "A<n> & MASK". Requirements: SECURITY.md §2 and DESIGN.md §5; differences from flatpak's and
# Docker's lists are in docs/seccomp.md.

# Reviewed for these native ABIs: clone's flags are A0 and TIOC* come from asm-generic on both
# (s390 passes clone's flags in A1). Compiling elsewhere fails until someone reviews the list.
architectures x86_64 aarch64

# --- Kernel log, accounting, quotas ---------------------------------------------------------------
deny syslog EPERM                       # dmesg: kernel addresses, other tenants' messages
deny acct EPERM                         # process accounting is host-wide state
deny quotactl EPERM                     # disk quota state of the host's file systems
deny quotactl_fd EPERM                  # the same through an fd (5.14)

# --- Kernel keyrings: not namespaced, shared with the host's users --------------------------------
deny add_key EPERM                      # store keys in a kernel keyring
deny keyctl EPERM                       # read or link keys (session keyring of the host)
deny request_key EPERM                  # may start /sbin/request-key upcalls on the host

# --- NUMA memory placement: host topology, historic CVE source ------------------------------------
deny mbind EPERM                        # per-range memory policy
deny get_mempolicy EPERM                # reveals the host's node layout
deny set_mempolicy EPERM                # per-task memory policy
deny set_mempolicy_home_node EPERM      # 5.17 addition to the same family
deny migrate_pages EPERM                # move another process's pages
deny move_pages EPERM                   # the same, per page

# --- Namespaces and mounts: the sandbox's shape is bwrap's, never the payload's -------------------
deny unshare EPERM                      # new namespaces (a new user ns regains every capability)
deny setns EPERM                        # join another namespace
deny clone if A0 & CLONE_NEWUSER EPERM  # clone() into a new user namespace (flags are A0 on x86/arm)
deny clone if A0 & CLONE_NEWNS EPERM    # the other namespace flags need a capability we do not
deny clone if A0 & CLONE_NEWPID EPERM   #   have anyway; refusing them here keeps that true if a
deny clone if A0 & CLONE_NEWNET EPERM   #   capability ever leaks (Docker refuses the same set)
deny clone if A0 & CLONE_NEWUTS EPERM
deny clone if A0 & CLONE_NEWIPC EPERM
deny clone if A0 & CLONE_NEWCGROUP EPERM
deny clone3 ENOSYS                      # flags live in a struct seccomp cannot read (CVE-2021-41133); ENOSYS makes glibc fall back to clone()
deny mount EPERM                        # classic mount(2)
deny umount EPERM                       # old ABIs only (not on x86_64/aarch64: left out there)
deny umount2 EPERM                      # uncover what bwrap mounted over
deny pivot_root EPERM                   # change the root mount
deny chroot EPERM                       # chroot escapes need a second chroot
deny open_tree ENOSYS                   # new mount API (5.2): detached mount trees
deny move_mount ENOSYS                  # attach them anywhere
deny fsopen ENOSYS                      # create a superblock
deny fsconfig ENOSYS                    # configure it
deny fsmount ENOSYS                     # turn it into a mount
deny fspick ENOSYS                      # reconfigure an existing one
deny mount_setattr ENOSYS               # change mount flags (5.12), e.g. drop MS_RDONLY
deny-number open_tree_attr x86_64=467 aarch64=467 x86=467 arm=467 riscv64=467 ppc64le=467 s390x=467 ENOSYS  # 6.15, unknown to libseccomp 2.5: open_tree() that also sets attributes

# --- io_uring: a second syscall interface that seccomp cannot see into ----------------------------
deny io_uring_setup ENOSYS              # ENOSYS: runtimes (libuv, liburing users) fall back to epoll/threads
deny io_uring_enter ENOSYS
deny io_uring_register ENOSYS

# --- Terminals: the payload shares no tty with anyone, but belt and braces ------------------------
deny ioctl if A1 & 0xffffffff == TIOCSTI EPERM   # push input into a terminal (CVE-2017-5226); cmd is 32 bits, high bits ignored by the kernel
deny ioctl if A1 & 0xffffffff == TIOCLINUX EPERM # the same through the VT console (CVE-2023-28100)
deny ioctl if A1 & 0xffffffff == TIOCSETD EPERM  # attach line disciplines (n_gsm, n_hdlc races: CVE-2023-6546, CVE-2017-2636)
deny vhangup EPERM                      # hang up the controlling terminal

# --- Tracing, profiling, cross-process access -----------------------------------------------------
deny ptrace EPERM                       # debug other processes (and old seccomp bypasses)
deny process_vm_readv EPERM             # read another process's memory
deny process_vm_writev EPERM            # write it
deny process_madvise EPERM              # advise on another process's memory (5.10)
deny pidfd_getfd EPERM                  # steal a file descriptor from another process
deny kcmp EPERM                         # compare kernel objects of other processes (address leaks)
deny perf_event_open EPERM              # perf: many CVEs, side channels
deny bpf EPERM                          # eBPF programs and maps
deny userfaultfd EPERM                  # stalls kernel copies: a staple of race exploits
deny personality if A0 != PER_LINUX EPERM   # no ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, UNAME26; PER_LINUX32 too (no 32-bit ABI here), and the 0xffffffff query

# --- Kernel modules, kexec, power, swap, raw I/O --------------------------------------------------
deny init_module EPERM                  # load a module
deny finit_module EPERM                 # load a module from an fd
deny delete_module EPERM                # unload one
deny kexec_load EPERM                   # boot another kernel
deny kexec_file_load EPERM              # the same from files
deny reboot EPERM                       # power off/reboot (in a pid ns: kill its init)
deny swapon EPERM                       # swap is host-wide
deny swapoff EPERM
deny iopl EPERM                         # x86 I/O privilege level
deny ioperm EPERM                       # x86 I/O port access
deny modify_ldt EPERM                   # 16-bit segments: info leaks, CVE-2015-5157/8830 class

# --- Clocks and host identity ---------------------------------------------------------------------
deny settimeofday EPERM                 # the clock is not namespaced
deny clock_settime EPERM
deny clock_adjtime EPERM                # also the read-only form: nothing in the sandbox needs it
deny adjtimex EPERM
deny sethostname EPERM                  # only the sandbox's own UTS ns, but the name is ours to set
deny setdomainname EPERM

# --- File handles: bypass path-based access checks ------------------------------------------------
deny open_by_handle_at EPERM            # "shocker": open any inode of a mounted fs by handle
deny name_to_handle_at EPERM            # produces the handles

# --- Obsolete or host-wide interfaces -------------------------------------------------------------
deny uselib EPERM                       # a.out loader, removed from recent kernels
deny lookup_dcookie EPERM               # oprofile leftovers: kernel pointers
deny nfsservctl EPERM                   # removed in 3.1; the number stays
deny fanotify_init EPERM                # file-system-wide event monitoring

# --- Sockets: the sandbox has an empty network namespace (loopback only) --------------------------
allow-socket-families AF_UNSPEC AF_UNIX AF_NETLINK   # every other family, in socket() and socketpair(), gets EAFNOSUPPORT: AF_INET/AF_INET6 need the network variant
deny socket if A0 == AF_NETLINK unless A2 in NETLINK_ROUTE EPROTONOSUPPORT   # rtnetlink for getaddrinfo()/getifaddrs()/ip; not xfrm, netfilter, generic netlink (module autoload), audit, …
