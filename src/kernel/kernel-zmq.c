/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One ZMQ socket of a kernel, driven by sd-event (kernel-zmq.h). */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <zmq.h>

#include "kernel/kernel-zmq.h"
#include "util/log.h"
#include "util/macro.h"

struct KernelSocket {
        void *zs;
        sd_event_source *io;
        sd_event_source *defer;          /* a drain after a send */
        KernelSocketHandler handler;
        void *userdata;
        bool dispatching;                /* inside the handler: a free waits until it returns */
        bool free_pending;
};

static void socket_destroy(KernelSocket *s) {
        s->io = sd_event_source_disable_unref(s->io);
        s->defer = sd_event_source_disable_unref(s->defer);
        if (s->zs)
                (void) zmq_close(s->zs);
        free(s);
}

KernelSocket *kernel_socket_free(KernelSocket *s) {
        if (!s)
                return NULL;
        if (s->dispatching) {
                /* Freed from its own handler: stop watching now, free once the handler returns. */
                s->free_pending = true;
                s->io = sd_event_source_disable_unref(s->io);
                s->defer = sd_event_source_disable_unref(s->defer);
                return NULL;
        }
        socket_destroy(s);
        return NULL;
}

static void msgs_close(zmq_msg_t *msgs, size_t n) {
        for (size_t i = 0; i < n; i++)
                (void) zmq_msg_close(&msgs[i]);
}

/* One whole multipart message, or -EAGAIN when none is queued. Frames past the maximum are read
 * and dropped (*ret_n is then past it: the caller refuses the message). */
static int socket_recv(KernelSocket *s, zmq_msg_t *msgs, size_t *ret_n, size_t *ret_total) {
        size_t n = 0, total = 0;
        int more = 1;

        while (more) {
                zmq_msg_t tmp, *m = n < KERNEL_SOCKET_MAX_FRAMES ? &msgs[n] : &tmp;
                size_t len = sizeof(more);

                (void) zmq_msg_init(m);
                if (zmq_msg_recv(m, s->zs, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
                        int r = -errno;

                        (void) zmq_msg_close(m);
                        msgs_close(msgs, MIN(n, (size_t) KERNEL_SOCKET_MAX_FRAMES));
                        return r == -EINTR ? -EAGAIN : r;
                }
                total += zmq_msg_size(m);
                if (zmq_getsockopt(s->zs, ZMQ_RCVMORE, &more, &len) < 0)
                        more = 0;
                if (m == &tmp)
                        (void) zmq_msg_close(&tmp);
                n++;
        }
        *ret_n = n;
        *ret_total = total;
        return 0;
}

/* Everything queued now, each message to the handler; stops if the handler freed the socket. */
static void socket_drain(KernelSocket *s) {
        static zmq_msg_t msgs[KERNEL_SOCKET_MAX_FRAMES];
        static struct iovec iov[KERNEL_SOCKET_MAX_FRAMES];

        for (unsigned budget = 0; budget < 1024; budget++) {
                size_t n = 0, total = 0;
                int r;

                r = socket_recv(s, msgs, &n, &total);
                if (r == -EAGAIN)
                        return;
                if (r < 0) {
                        log_debug_errno(r, "Reading a kernel socket failed: %m");
                        return;
                }
                if (n > KERNEL_SOCKET_MAX_FRAMES) {
                        log_warning("A kernel sent a message of %zu frames (at most %u are taken), dropped.", n,
                                    KERNEL_SOCKET_MAX_FRAMES);
                        msgs_close(msgs, KERNEL_SOCKET_MAX_FRAMES);
                        continue;
                }
                for (size_t i = 0; i < n; i++)
                        iov[i] = (struct iovec) { .iov_base = zmq_msg_data(&msgs[i]), .iov_len = zmq_msg_size(&msgs[i]) };
                s->dispatching = true;
                s->handler(s, iov, n, s->userdata);
                s->dispatching = false;
                msgs_close(msgs, n);
                if (s->free_pending) {
                        socket_destroy(s);
                        return;
                }
        }
        /* More than a budget's worth at once: the rest on the next iteration of the loop. */
        if (s->defer)
                (void) sd_event_source_set_enabled(s->defer, SD_EVENT_ONESHOT);
}

/* ZMQ_EVENTS reads the socket's pending commands and re-arms its fd; input then means messages,
 * drained until EAGAIN (after which the fd signals again when more arrive). */
static void socket_process(KernelSocket *s) {
        int events = 0;
        size_t len = sizeof(events);

        if (s->dispatching)
                return;
        if (zmq_getsockopt(s->zs, ZMQ_EVENTS, &events, &len) < 0 || !(events & ZMQ_POLLIN))
                return;
        socket_drain(s);
}

static int on_io(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        socket_process(userdata);
        return 0;
}

static int on_defer(sd_event_source *src, void *userdata) {
        socket_process(userdata);
        return 0;
}

int kernel_socket_new(void *zctx, sd_event *e, int type, const char *endpoint, const char *description,
                      KernelSocketHandler handler, void *userdata, KernelSocket **ret) {
        KernelSocket *s;
        int64_t max = (int64_t) KERNEL_SOCKET_MAX_FRAME_BYTES;
        int fd, zero = 0, one = 1, reconnect = KERNEL_SOCKET_RECONNECT_MSEC, r;
        size_t len = sizeof(fd);

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->handler = handler;
        s->userdata = userdata;
        s->zs = zmq_socket(zctx, type);
        if (!s->zs) {
                r = -errno;
                free(s);
                return r;
        }
        /* No lingering of unsent messages at close: a kernel that is gone takes nothing more. */
        if (zmq_setsockopt(s->zs, ZMQ_LINGER, &zero, sizeof(zero)) < 0 ||
            zmq_setsockopt(s->zs, ZMQ_MAXMSGSIZE, &max, sizeof(max)) < 0 ||
            (type == ZMQ_SUB && zmq_setsockopt(s->zs, ZMQ_SUBSCRIBE, "", 0) < 0) ||
            /* A starting kernel binds its sockets a moment after we connect: a refused connect to
             * a Unix socket costs a syscall, so look again often (libzmq's default waits 100 ms,
             * all of it added to a kernel's start). */
            zmq_setsockopt(s->zs, ZMQ_RECONNECT_IVL, &reconnect, sizeof(reconnect)) < 0 ||
            /* Nothing is queued for a kernel not listening yet: a send fails with EAGAIN instead
             * (the readiness nudges would pile up otherwise). */
            (type == ZMQ_DEALER && zmq_setsockopt(s->zs, ZMQ_IMMEDIATE, &one, sizeof(one)) < 0) ||
            zmq_connect(s->zs, endpoint) < 0 ||
            zmq_getsockopt(s->zs, ZMQ_FD, &fd, &len) < 0) {
                r = -errno;
                socket_destroy(s);
                return r;
        }
        r = sd_event_add_io(e, &s->io, fd, EPOLLIN, on_io, s);
        if (r >= 0)
                r = sd_event_add_defer(e, &s->defer, on_defer, s);
        if (r >= 0)
                r = sd_event_source_set_enabled(s->defer, SD_EVENT_OFF);
        if (r < 0) {
                socket_destroy(s);
                return r;
        }
        (void) sd_event_source_set_description(s->io, description);
        *ret = s;
        return 0;
}

int kernel_socket_send(KernelSocket *s, const struct iovec *frames, size_t n) {
        for (size_t i = 0; i < n; i++) {
                int flags = ZMQ_DONTWAIT | (i + 1 < n ? ZMQ_SNDMORE : 0);

                /* Only the first frame can find the queue full; the rest of the message follows it. */
                if (zmq_send(s->zs, frames[i].iov_base, frames[i].iov_len, flags) < 0) {
                        if (i == 0)
                                return -errno;
                        return log_debug_errno(errno, "A kernel socket refused part of a message: %m");
                }
        }
        /* A send can consume the fd's signal of input that arrived meanwhile: look again soon. */
        if (s->defer)
                (void) sd_event_source_set_enabled(s->defer, SD_EVENT_ONESHOT);
        return 0;
}
