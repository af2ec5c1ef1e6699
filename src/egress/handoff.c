/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Connections handed over by sandbox-runner-bridge: the client's TCP socket itself, passed with SCM_RIGHTS. */

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "egress/handoff.h"
#include "util/macro.h"

#define HANDOFF_FDS_MAX 4       /* room for a few: extra ones are then seen (and closed), not just cut off */

static int getsockopt_int(int fd, int option, int *ret) {
        socklen_t len = sizeof(*ret);

        *ret = 0;
        return getsockopt(fd, SOL_SOCKET, option, ret, &len) < 0 ? negative_errno() : 0;
}

int handoff_check_socket(int fd) {
        int domain, type, protocol, listening, r;
        struct sockaddr_storage peer;
        socklen_t len = sizeof(peer);
        struct stat st;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISSOCK(st.st_mode))
                return -ENOTSOCK;
        if ((r = getsockopt_int(fd, SO_DOMAIN, &domain)) < 0 ||
            (r = getsockopt_int(fd, SO_TYPE, &type)) < 0 ||
            (r = getsockopt_int(fd, SO_PROTOCOL, &protocol)) < 0 ||
            (r = getsockopt_int(fd, SO_ACCEPTCONN, &listening)) < 0)
                return r;
        if ((domain != AF_INET && domain != AF_INET6) || type != SOCK_STREAM || protocol != IPPROTO_TCP)
                return -EPROTOTYPE;
        if (listening)
                return -EPROTOTYPE;
        if (getpeername(fd, (struct sockaddr *) &peer, &len) < 0)
                return negative_errno();        /* ENOTCONN: not connected (yet, or any more) */
        return 0;
}

int handoff_receive(int fd, char *buf, size_t size, size_t *ret_size, int *ret_fd) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * HANDOFF_FDS_MAX)];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = size };
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = &control,
                .msg_controllen = sizeof(control),
        };
        int fds[HANDOFF_FDS_MAX * 2], n_fds = 0, r;
        ssize_t n;

        n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return errno == EINTR ? -EAGAIN : negative_errno();

        /* Collect every descriptor that was installed, whatever the message looks like. */
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
                        int passed;

                        memcpy(&passed, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        if (n_fds < (int) ELEMENTSOF(fds))
                                fds[n_fds++] = passed;
                        else
                                safe_close(passed);
                }
        }

        if (n > 0 && buf[0] == HANDOFF_MARKER) {
                /* A hand-over: exactly the marker, exactly one descriptor, nothing cut off. */
                if (n != 1 || n_fds != 1 || (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)))
                        r = -EBADMSG;
                else
                        r = handoff_check_socket(fds[0]);
                if (r >= 0) {
                        int flags = fcntl(fds[0], F_GETFL);

                        if (flags < 0 || fcntl(fds[0], F_SETFL, flags | O_NONBLOCK) < 0)
                                r = negative_errno();
                }
                if (r < 0) {
                        for (int i = 0; i < n_fds; i++)
                                safe_close(fds[i]);
                        return r;
                }
                *ret_fd = fds[0];
                *ret_size = 0;
                return 1;
        }

        /* A plain client: descriptors have no meaning here. */
        for (int i = 0; i < n_fds; i++)
                safe_close(fds[i]);
        *ret_size = (size_t) n;
        return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* The guard against blocking on a shared file description. */

static timer_t guard_timer;
static bool guard_ready;
static volatile sig_atomic_t guard_fired;

static void guard_handler(int sig) {
        guard_fired = 1;        /* nothing else: the point is the interrupted system call */
}

int handoff_guard_setup(void) {
        struct sigaction sa = { .sa_handler = guard_handler };  /* no SA_RESTART */
        struct sigevent sev = {
                .sigev_notify = SIGEV_THREAD_ID,
                .sigev_signo = SIGALRM,
        };
        sigset_t mask;

        if (guard_ready)
                return 0;
        sev._sigev_un._tid = gettid();
        if (sigemptyset(&sa.sa_mask) < 0 || sigaction(SIGALRM, &sa, NULL) < 0)
                return negative_errno();
        (void) sigemptyset(&mask);
        (void) sigaddset(&mask, SIGALRM);
        if (sigprocmask(SIG_UNBLOCK, &mask, NULL) < 0)
                return negative_errno();
        if (timer_create(CLOCK_MONOTONIC, &sev, &guard_timer) < 0)
                return negative_errno();
        guard_ready = true;
        return 0;
}

bool handoff_guard_available(void) {
        return guard_ready;
}

void handoff_guard_arm(void) {
        /* Periodic: every blocking call is interrupted, not just the first one. */
        struct timespec ts = {
                .tv_sec = HANDOFF_GUARD_USEC / USEC_PER_SEC,
                .tv_nsec = (HANDOFF_GUARD_USEC % USEC_PER_SEC) * NSEC_PER_USEC,
        };
        struct itimerspec its = { .it_value = ts, .it_interval = ts };

        if (guard_ready)
                (void) timer_settime(guard_timer, 0, &its, NULL);
}

bool handoff_guard_fired(void) {
        return guard_fired;
}

bool handoff_guard_disarm(void) {
        bool fired;

        if (!guard_ready)
                return false;
        (void) timer_settime(guard_timer, 0, &(struct itimerspec) {}, NULL);
        /* A signal that became pending before the disarm has been handled by now (on the way back
         * from the system call above). */
        fired = guard_fired;
        guard_fired = 0;
        return fired;
}

int handoff_guard_close(int fd) {
        if (fd < 0)
                return -EBADF;
        handoff_guard_arm();
        (void) close(fd);       /* releases the descriptor even when the lingering part is interrupted */
        (void) handoff_guard_disarm();
        return -EBADF;
}

bool handoff_socket_blocking(int fd) {
        int flags = fcntl(fd, F_GETFL);

        return flags >= 0 && !(flags & O_NONBLOCK);
}
