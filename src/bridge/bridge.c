/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-runner-bridge: inside an egress sandbox, hands TCP connections on loopback over to the
 * bind-mounted egress gateway socket, and runs the workload as its child, passing its exit status on. */

/*
 * Static, libc only, single-threaded: one epoll loop carries a signalfd (SIGCHLD and the signals
 * forwarded to the workload), the listening socket and, while they are set up, its connections.
 *
 * By default each accepted connection is handed over: the bridge connects to the gateway's AF_UNIX
 * socket, sends one NUL byte with the accepted TCP socket attached (SCM_RIGHTS) and closes both;
 * the gateway identifies the execution from the AF_UNIX connection and then reads the request from,
 * and relays on, the TCP socket itself (src/egress/handoff.h). No byte of the workload's passes
 * through the bridge, and the data path has one hop less.
 *
 * With --relay, the bridge relays the bytes itself instead (the original protocol: the gateway sees
 * a plain byte-stream client). A relay never looks at the bytes. Each direction ("flow") reads once from its source (splice() into a pipe, or read()
 * into a 64 KiB buffer) and writes all of it to its destination before it reads again, so memory
 * is bounded per relay, and the number of relays is capped. An fd is in the epoll set only while the
 * relay waits for it (relay_update()), so a level-triggered EPOLLHUP/EPOLLERR cannot spin.
 * Nothing here needs a capability: bwrap --unshare-net brings lo up, and the port is above 1024.
 */

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "util/macro.h"

#define MAX_RELAYS 256                          /* relayed (or being handed over) at once; beyond this,
                                                 * connections are accepted and closed */
#define HANDOFF_MARKER '\0'                     /* the one byte that carries the socket (src/egress/handoff.h) */
#define COPY_BUFFER_SIZE (64U * 1024U)          /* per flow in read/write mode */
#define SPLICE_CHUNK (1U << 20)                 /* asked for; the pipe's capacity bounds it */
#define RETRY_MSEC 10                           /* gateway backlog full: connect() again this often */
#define CONNECT_TIMEOUT_USEC (5 * USEC_PER_SEC) /* ... for at most this long */
#define ACCEPT_BURST 16
#define EXIT_BRIDGE_FAILURE 125                 /* as env(1) and timeout(1): the wrapper itself failed */
#define EXIT_EXEC_FAILURE 127

enum { TAG_SIGNAL, TAG_LISTEN, TAG_RELAY };     /* epoll data; a relay fd is TAG_RELAY + 2 * slot + side */

typedef struct Flow {
        int src, dst;           /* borrowed from the relay */
        int pipe[2];            /* splice mode; -EBADF in read/write mode */
        char *buf;              /* read/write mode */
        size_t pending, off;    /* read but not yet written: in the pipe, or buf[off, off + pending) */
        bool done;              /* src reached EOF and dst was shut down for writing */
} Flow;

typedef struct Relay {
        bool used;
        int fd[2];              /* [0] the TCP client, [1] the gateway */
        uint32_t events[2];     /* epoll interest of fd[i]; 0 = not in the epoll set */
        Flow flow[2];           /* flow[i] reads fd[i] and writes fd[!i] */
        uint64_t connect_deadline; /* non-zero while connect() to the gateway is retried */
} Relay;

typedef struct Bridge {
        int epoll_fd, signal_fd, listen_fd;
        pid_t child;
        bool splice, relay, listen_paused, gateway_warned;
        struct sockaddr_un gateway;
        socklen_t gateway_len;
        unsigned n_relays, max_relays, n_connecting;
        Relay relays[MAX_RELAYS];
} Bridge;

_printf_(2, 3)
static int log_errno(int error, const char *format, ...) {
        va_list ap;

        errno = abs(error);
        fputs("sandbox-runner-bridge: ", stderr);
        va_start(ap, format);
        vfprintf(stderr, format, ap);
        va_end(ap);
        fputc('\n', stderr);
        return -abs(error);
}

static uint64_t now_usec(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

static void flow_done(Flow *f) {
        f->pipe[0] = safe_close(f->pipe[0]);
        f->pipe[1] = safe_close(f->pipe[1]);
        f->buf = mfree(f->buf);
}

static int flow_init(Flow *f, int src, int dst, bool use_splice) {
        *f = (Flow) { .src = src, .dst = dst, .pipe = { -EBADF, -EBADF } };
        if (use_splice && pipe2(f->pipe, O_NONBLOCK | O_CLOEXEC) >= 0) {
                /* Bigger pipes: fewer splice() round trips per MiB (best effort; the default
                 * 64 KiB stays if the limit in /proc/sys/fs/pipe-max-size says no). */
                (void) fcntl(f->pipe[1], F_SETPIPE_SZ, 1 << 20);
                return 0;
        }
        f->buf = malloc(COPY_BUFFER_SIZE);      /* no pipe to be had: copy instead */
        return f->buf ? 0 : -ENOMEM;
}

/* Reads once from src; only called with nothing pending, so EOF is passed on at once. */
static int flow_fill(Bridge *b, Flow *f) {
        ssize_t n;
        int r;

        assert(f->pending == 0 && !f->done);
        if (f->pipe[1] >= 0) {
                n = splice(f->src, NULL, f->pipe[1], NULL, SPLICE_CHUNK, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                if (n < 0 && (errno == EINVAL || errno == ENOSYS || errno == EPERM || errno == EOPNOTSUPP)) {
                        /* A kernel or seccomp filter without splice() here: copy from now on. */
                        b->splice = false;
                        flow_done(f);
                        r = flow_init(f, f->src, f->dst, false);
                        return r < 0 ? r : flow_fill(b, f);
                }
        } else
                n = read(f->src, f->buf, COPY_BUFFER_SIZE);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        if (n == 0) {
                /* Half-close: dst's peer sees EOF while the other direction keeps flowing. */
                if (shutdown(f->dst, SHUT_WR) < 0 && errno != ENOTCONN)
                        return -errno;
                f->done = true;
                return 0;
        }
        f->pending = (size_t) n;
        f->off = 0;
        return 0;
}

/* Writes what is pending until it is all out or dst would block. */
static int flow_drain(Flow *f) {
        while (f->pending > 0) {
                ssize_t n;

                if (f->pipe[0] >= 0)
                        n = splice(f->pipe[0], NULL, f->dst, NULL, f->pending,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                else
                        n = send(f->dst, f->buf + f->off, f->pending, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return errno == EAGAIN ? 0 : -errno;
                f->pending -= (size_t) n;
                f->off += (size_t) n;
        }
        return 0;
}

static void bridge_listen(Bridge *b, bool on) {
        struct epoll_event ev = { .events = on ? EPOLLIN : 0, .data.u64 = TAG_LISTEN };

        if (b->listen_paused == on && epoll_ctl(b->epoll_fd, EPOLL_CTL_MOD, b->listen_fd, &ev) >= 0)
                b->listen_paused = !on;
}

static void relay_close(Bridge *b, Relay *r) {
        if (!r->used)
                return;
        for (unsigned i = 0; i < 2; i++) {
                flow_done(&r->flow[i]);
                r->fd[i] = safe_close(r->fd[i]);        /* which also drops it from the epoll set */
        }
        if (r->connect_deadline > 0)
                b->n_connecting--;
        *r = (Relay) {};
        b->n_relays--;
        bridge_listen(b, true);
}

/* Registers each fd for exactly what the relay waits for on it: EPOLLIN while the flow it feeds is
 * empty, EPOLLOUT while the flow into it has bytes pending, else nothing (removed from the set). */
static int relay_update(Bridge *b, Relay *r) {
        if (r->flow[0].done && r->flow[1].done) {
                relay_close(b, r);
                return 0;
        }
        for (unsigned side = 0; side < 2; side++) {
                const Flow *out = &r->flow[side], *in = &r->flow[!side];
                uint32_t want = (!out->done && out->pending == 0 ? EPOLLIN : 0) |
                                (in->pending > 0 ? EPOLLOUT : 0);
                struct epoll_event ev = {
                        .events = want,
                        .data.u64 = TAG_RELAY + 2 * (uint64_t) (r - b->relays) + side,
                };
                int op = want == 0 ? EPOLL_CTL_DEL : r->events[side] == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;

                if (want == r->events[side])
                        continue;
                if (epoll_ctl(b->epoll_fd, op, r->fd[side], &ev) < 0)
                        return -errno;
                r->events[side] = want;
        }
        return 0;
}

static void relay_event(Bridge *b, Relay *r, unsigned side) {
        Flow *out = &r->flow[side], *in = &r->flow[!side];

        /* Whatever the event (IN, OUT, HUP, ERR), take the step the fd is registered for: it moves
         * data, meets EOF or fails, so no event repeats without progress. Any error ends the relay. */
        if (in->pending > 0 && flow_drain(in) < 0)
                goto fail;
        if (!out->done && out->pending == 0 && (flow_fill(b, out) < 0 || flow_drain(out) < 0))
                goto fail;
        if (relay_update(b, r) >= 0)
                return;
fail:
        relay_close(b, r);
}

/* Sends the client's socket to the gateway: one marker byte with the fd attached. */
static int relay_handoff(Relay *r) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        char marker = HANDOFF_MARKER;
        struct iovec iov = { .iov_base = &marker, .iov_len = 1 };
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = &control,
                .msg_controllen = sizeof(control),
        };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &r->fd[0], sizeof(int));
        for (;;) {
                ssize_t n = sendmsg(r->fd[1], &mh, MSG_DONTWAIT | MSG_NOSIGNAL);

                if (n == 1)
                        return 0;
                if (n < 0 && errno == EINTR)
                        continue;
                return n < 0 ? -errno : -EIO;
        }
}

/* 0 = connected (and, unless relaying, handed over and closed), or to be retried; <0 = give up. */
static int relay_connect(Bridge *b, Relay *r) {
        int k;

        if (connect(r->fd[1], (const struct sockaddr *) &b->gateway, b->gateway_len) >= 0) {
                if (r->connect_deadline > 0)
                        b->n_connecting--;
                r->connect_deadline = 0;
                if (b->relay)
                        return relay_update(b, r);
                /* The gateway owns the connection now; our copies go. */
                k = relay_handoff(r);
                if (k < 0) {
                        if (!b->gateway_warned)
                                (void) log_errno(k, "Failed to hand a connection over to the egress gateway "
                                                 "'%s', closing it (further failures are not reported): %m",
                                                 b->gateway.sun_path);
                        b->gateway_warned = true;
                        return k;
                }
                relay_close(b, r);
                return 0;
        }
        k = -errno;
        if (k == -EAGAIN) {
                /* The gateway's backlog is full, and AF_UNIX offers nothing to wait for: retry on a timer. */
                if (r->connect_deadline == 0) {
                        r->connect_deadline = now_usec() + CONNECT_TIMEOUT_USEC;
                        b->n_connecting++;
                }
                if (now_usec() < r->connect_deadline)
                        return 0;
                k = -ETIMEDOUT;
        }
        if (!b->gateway_warned)
                (void) log_errno(k, "Failed to connect to the egress gateway '%s', closing the connection "
                                 "(further failures are not reported): %m", b->gateway.sun_path);
        b->gateway_warned = true;
        return k;
}

static void relay_start(Bridge *b, int client_fd) {
        Relay *r = b->relays;

        while (r->used)
                r++;            /* the caller checked n_relays < max_relays <= MAX_RELAYS */
        *r = (Relay) { .used = true, .fd = { client_fd, -EBADF } };
        r->flow[0].pipe[0] = r->flow[0].pipe[1] = r->flow[1].pipe[0] = r->flow[1].pipe[1] = -EBADF;
        b->n_relays++;

        r->fd[1] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (r->fd[1] < 0 ||
            (b->relay && flow_init(&r->flow[0], r->fd[0], r->fd[1], b->splice) < 0) ||
            (b->relay && flow_init(&r->flow[1], r->fd[1], r->fd[0], b->splice) < 0) ||
            relay_connect(b, r) < 0)
                relay_close(b, r);
}

static void bridge_accept(Bridge *b) {
        for (unsigned i = 0; i < ACCEPT_BURST; i++) {
                _cleanup_close_ int fd = accept4(b->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (fd < 0 && (errno == EINTR || errno == ECONNABORTED || errno == EPROTO))
                        continue;
                if (fd < 0) {
                        /* Out of fds or memory: wait for a relay to close rather than wake up for the
                         * same pending connection forever (with none open, the retry timer re-arms). */
                        if (errno != EAGAIN)
                                bridge_listen(b, false);
                        return;
                }
                if (b->n_relays < b->max_relays)
                        relay_start(b, STEAL_FD(fd));
                /* else over the cap: the cleanup handler closes it right away */
        }
}

/* After every loop iteration: the retries that have no fd to wait for. */
static void bridge_retry(Bridge *b) {
        if (b->listen_paused && b->n_relays == 0)
                bridge_listen(b, true);
        for (Relay *r = b->relays; r < b->relays + MAX_RELAYS && b->n_connecting > 0; r++)
                if (r->used && r->connect_deadline > 0 && relay_connect(b, r) < 0)
                        relay_close(b, r);
}

/* 1 = our child was reaped and *ret_status is its wait status. */
static int bridge_signal(Bridge *b, int *ret_status) {
        struct signalfd_siginfo si;
        pid_t pid;

        if (read(b->signal_fd, &si, sizeof(si)) != (ssize_t) sizeof(si))
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        if (si.ssi_signo != SIGCHLD)
                return kill(b->child, (int) si.ssi_signo) < 0 && errno != ESRCH ? -errno : 0;
        /* Only our own child: every other process in the sandbox is reaped by bwrap's init. */
        pid = waitpid(b->child, ret_status, WNOHANG);
        return pid < 0 ? -errno : pid > 0;
}

/* Leaves the way the child left, so whoever waits for us sees the same wait status. */
_Noreturn static void exit_like(int status) {
        sigset_t ss;
        int sig;

        if (WIFEXITED(status))
                _exit(WEXITSTATUS(status));
        sig = WTERMSIG(status);
        (void) setrlimit(RLIMIT_CORE, &(struct rlimit) {});     /* the child's core dump is the one */
        (void) signal(sig, SIG_DFL);
        (void) sigemptyset(&ss);
        (void) sigaddset(&ss, sig);
        (void) sigprocmask(SIG_UNBLOCK, &ss, NULL);
        (void) raise(sig);
        _exit(128 + sig);       /* a signal that does not kill by default */
}

static int parse_listen(const char *s, struct sockaddr_in *ret) {
        const char *colon = strrchr(s, ':');
        char host[INET_ADDRSTRLEN], *end;
        unsigned long port;

        if (!colon || (size_t) (colon - s) >= sizeof(host))
                return -EINVAL;
        memcpy(host, s, colon - s);
        host[colon - s] = '\0';
        errno = 0;
        port = strtoul(colon + 1, &end, 10);
        if (errno != 0 || end == colon + 1 || *end != '\0' || port > 65535)
                return -EINVAL;
        *ret = (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons(port) };
        return inet_pton(AF_INET, host, &ret->sin_addr) == 1 ? 0 : -EINVAL;
}

/* 1 = run, 0 = exit successfully (--help), <0 = usage error (reported). */
static int parse_argv(int argc, char *argv[], Bridge *b, const char **ret_listen, char ***ret_command) {
        static const struct option options[] = {
                { "gateway",   required_argument, NULL, 'g' },
                { "listen",    required_argument, NULL, 'l' },
                { "no-splice", no_argument,       NULL, 'S' },
                { "relay",     no_argument,       NULL, 'R' },
                { "help",      no_argument,       NULL, 'h' },
                {}
        };
        const char *gateway = NULL;
        int c;

        /* '+': stop at the first non-option, so COMMAND's options are never taken for ours. */
        while ((c = getopt_long(argc, argv, "+h", options, NULL)) >= 0)
                switch (c) {
                case 'g':
                        gateway = optarg;
                        break;
                case 'l':
                        *ret_listen = optarg;
                        break;
                case 'S':
                        b->splice = false;
                        break;
                case 'R':
                        b->relay = true;
                        break;
                case 'h':
                        printf("%s --gateway PATH [--listen IPV4:PORT] [--relay [--no-splice]] -- COMMAND [ARGS...]\n\n"
                               "Runs COMMAND and hands TCP connections on IPV4:PORT (default\n"
                               "127.0.0.1:18118) over to the egress gateway's unix socket PATH (with\n"
                               "--relay: relays their bytes to it). Started by sandbox-runnerd inside a\n"
                               "sandbox; not meant to be run by hand.\n",
                               program_invocation_short_name);
                        return 0;
                default:
                        return -EINVAL;
                }

        if (!gateway || gateway[0] != '/' || strlen(gateway) >= sizeof(b->gateway.sun_path))
                return log_errno(EINVAL, "--gateway= needs an absolute socket path shorter than %zu bytes.",
                                 sizeof(b->gateway.sun_path));
        if (optind >= argc)
                return log_errno(EINVAL, "No command given (... -- COMMAND [ARGS...]).");
        b->gateway.sun_family = AF_UNIX;
        strcpy(b->gateway.sun_path, gateway);
        b->gateway_len = offsetof(struct sockaddr_un, sun_path) + strlen(gateway) + 1;
        *ret_command = argv + optind;
        return 1;
}

static int loopback_check_up(void) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = { .ifr_name = "lo" };

        if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return log_errno(errno, "Failed to query the loopback interface: %m");
        if (ifr.ifr_flags & IFF_UP)
                return 0;       /* the usual case: bwrap --unshare-net brought it up */
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return log_errno(errno, "The loopback interface 'lo' is down, and bringing it up needs "
                                 "CAP_NET_ADMIN in the network namespace: %m");
        return 0;
}

static int listen_socket(const char *address) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_in sa;

        if (parse_listen(address, &sa) < 0)
                return log_errno(EINVAL, "Invalid --listen= address '%s', expected IPV4:PORT.", address);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int) { 1 }, sizeof(int)) < 0 ||
            bind(fd, (const struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            listen(fd, SOMAXCONN) < 0)
                return log_errno(errno, "Failed to listen on '%s': %m", address);
        return STEAL_FD(fd);
}

/* Raises the soft fd limit (the workload gets the original back) and sizes the relay cap to it. */
static void bridge_size(Bridge *b, struct rlimit *ret_saved) {
        struct rlimit rl;
        rlim_t fds;

        b->max_relays = MAX_RELAYS;
        if (getrlimit(RLIMIT_NOFILE, ret_saved) < 0)
                return;
        rl = *ret_saved;
        rl.rlim_cur = MIN(rl.rlim_max, (rlim_t) 4096);
        if (rl.rlim_cur <= ret_saved->rlim_cur || setrlimit(RLIMIT_NOFILE, &rl) < 0)
                rl = *ret_saved;
        if (rl.rlim_cur == RLIM_INFINITY)
                return;
        /* 6 fds per relay with splice (2 sockets, 2 pipes), 2 without or when handing over; 16 kept
         * for the rest. */
        fds = rl.rlim_cur > 16 ? rl.rlim_cur - 16 : 0;
        b->max_relays = MIN((rlim_t) MAX_RELAYS, fds / (b->relay && b->splice ? 6 : 2));
}

static int bridge_loop(Bridge *b, int *ret_status) {
        for (;;) {
                struct epoll_event events[64];
                int n, r;

                n = epoll_wait(b->epoll_fd, events, ELEMENTSOF(events),
                               b->n_connecting > 0 || (b->listen_paused && b->n_relays == 0) ?
                               RETRY_MSEC : -1);
                if (n < 0 && errno != EINTR)
                        return log_errno(errno, "epoll_wait() failed: %m");
                for (int i = 0; i < n; i++) {
                        uint64_t tag = events[i].data.u64;
                        Relay *relay;

                        if (tag == TAG_SIGNAL) {
                                r = bridge_signal(b, ret_status);
                                if (r < 0)
                                        return log_errno(r, "Failed to handle a signal: %m");
                                if (r > 0)
                                        return 0;
                        } else if (tag == TAG_LISTEN)
                                bridge_accept(b);
                        else {
                                /* Skips a relay closed (or its slot taken again) earlier in this batch. */
                                relay = &b->relays[(tag - TAG_RELAY) / 2];
                                if (relay->used && relay->connect_deadline == 0)
                                        relay_event(b, relay, (tag - TAG_RELAY) % 2);
                        }
                }
                bridge_retry(b);
        }
}

int main(int argc, char *argv[]) {
        Bridge b = { .epoll_fd = -EBADF, .signal_fd = -EBADF, .listen_fd = -EBADF, .splice = true };
        _cleanup_close_ int listen_fd = -EBADF, signal_fd = -EBADF, epoll_fd = -EBADF;
        struct sigaction ignore = { .sa_handler = SIG_IGN }, saved_sigpipe;
        const char *listen_address = "127.0.0.1:18118";
        struct rlimit saved_nofile = {};
        sigset_t mask, saved_mask;
        char **command = NULL;
        pid_t parent;
        int r, status;

        r = parse_argv(argc, argv, &b, &listen_address, &command);
        if (r <= 0)
                return r < 0 ? EXIT_BRIDGE_FAILURE : EXIT_SUCCESS;
        if (loopback_check_up() < 0)
                return EXIT_BRIDGE_FAILURE;
        /* Listening before the workload starts: its first connect() finds us. */
        b.listen_fd = listen_fd = listen_socket(listen_address);
        if (listen_fd < 0)
                return EXIT_BRIDGE_FAILURE;
        bridge_size(&b, &saved_nofile);

        /* Blocked before fork(): a signal that comes early waits in the signalfd, none is lost. */
        (void) sigemptyset(&mask);
        (void) sigaddset(&mask, SIGCHLD);
        (void) sigaddset(&mask, SIGTERM);
        (void) sigaddset(&mask, SIGINT);
        (void) sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, &saved_mask) < 0 ||
            sigaction(SIGPIPE, &ignore, &saved_sigpipe) < 0) {
                (void) log_errno(errno, "Failed to set up signals: %m");
                return EXIT_BRIDGE_FAILURE;
        }
        b.signal_fd = signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
        b.epoll_fd = epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (signal_fd < 0 || epoll_fd < 0 ||
            epoll_ctl(epoll_fd, EPOLL_CTL_ADD, signal_fd,
                      &(struct epoll_event) { .events = EPOLLIN, .data.u64 = TAG_SIGNAL }) < 0 ||
            epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd,
                      &(struct epoll_event) { .events = EPOLLIN, .data.u64 = TAG_LISTEN }) < 0) {
                (void) log_errno(errno, "Failed to set up the event loop: %m");
                return EXIT_BRIDGE_FAILURE;
        }

        parent = getpid();
        b.child = fork();
        if (b.child < 0) {
                (void) log_errno(errno, "Failed to fork: %m");
                return EXIT_BRIDGE_FAILURE;
        }
        if (b.child == 0) {
                /* Should the bridge die, so does the workload (bwrap's init would kill it anyway). */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(EXIT_BRIDGE_FAILURE);
                (void) sigaction(SIGPIPE, &saved_sigpipe, NULL);
                (void) sigprocmask(SIG_SETMASK, &saved_mask, NULL);
                if (saved_nofile.rlim_max > 0)
                        (void) setrlimit(RLIMIT_NOFILE, &saved_nofile);
                execvp(command[0], command);    /* all our fds are O_CLOEXEC; stdio is inherited */
                (void) log_errno(errno, "Failed to execute '%s': %m", command[0]);
                _exit(EXIT_EXEC_FAILURE);
        }

        if (bridge_loop(&b, &status) < 0) {
                /* Do not leave the workload running without its bridge. */
                (void) kill(b.child, SIGKILL);
                while (waitpid(b.child, &status, 0) < 0 && errno == EINTR)
                        ;
                status = W_EXITCODE(EXIT_BRIDGE_FAILURE, 0);
        }
        /* The workload's lifetime is the one that matters: close every relay and leave at once. */
        for (unsigned i = 0; i < MAX_RELAYS; i++)
                relay_close(&b, &b.relays[i]);
        exit_like(status);
}
