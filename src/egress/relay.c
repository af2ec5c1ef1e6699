/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Moving bytes one way between two sockets: queued bytes first, then splice() through a pipe. */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/handoff.h"
#include "egress/proxy-request.h"
#include "egress/relay.h"
#include "util/macro.h"

#define PUMP_PIPE_MAX (1024U * 1024U)   /* what the pipe of a busy direction grows to */
#define PUMP_PIPE_DEFAULT (64U * 1024U)
#define COPY_CHUNK (64U * 1024U)        /* read()/recv() into user space: request bodies, no-splice fallback */

/*
 * Pipe sizes. The kernel charges a pipe's capacity to its user, and once a user holds more than
 * fs.pipe-user-pages-soft (16384 pages, 64 MiB, by default) every new pipe of that user gets just
 * two pages. So pipes start at the default size and only a direction that fills its pipe (a bulk
 * transfer) grows it to PUMP_PIPE_MAX, while the grown pipes of the whole process stay within half
 * of that limit; the others keep 64 KiB, which is slower but never starves new connections.
 */
static size_t pipes_grown_bytes;
static size_t pipes_grow_budget;

static size_t pump_grow_budget(void) {
        _cleanup_close_ int fd = -EBADF;
        unsigned long long pages = 16384;       /* the kernel's default */
        char buf[32] = {};

        if (pipes_grow_budget > 0)
                return pipes_grow_budget;
        /* Not readable under ProcSubset=pid: the default stands. */
        fd = open("/proc/sys/fs/pipe-user-pages-soft", O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0) {
                char *end;
                unsigned long long v = strtoull(buf, &end, 10);

                if (end != buf)
                        pages = v;
        }
        pipes_grow_budget = pages == 0 ? SIZE_MAX :
                (size_t) MIN(pages * (unsigned long long) sysconf(_SC_PAGESIZE) / 2, (unsigned long long) SIZE_MAX);
        return pipes_grow_budget;
}

static void pump_grow_pipe(Pump *p) {
        int r;

        if (p->pipe_size >= PUMP_PIPE_MAX || p->pipe_grow_failed ||
            pipes_grown_bytes + PUMP_PIPE_MAX > pump_grow_budget())
                return;         /* (the budget may allow it later) */
        r = fcntl(p->pipe[1], F_SETPIPE_SZ, (int) PUMP_PIPE_MAX);
        if (r < 0 || (size_t) r <= p->pipe_size) {
                p->pipe_grow_failed = true;     /* fs.pipe-max-size or the user limit says no */
                return;
        }
        pipes_grown_bytes += (size_t) r;
        p->pipe_grown = (size_t) r;
        p->pipe_size = (size_t) r;
}

int pump_init(Pump *p, int src, int dst, bool shutdown_dst) {
        int r;

        *p = (Pump) {
                .src = src,
                .dst = dst,
                .pipe = { -EBADF, -EBADF },
                .shutdown_dst = shutdown_dst,
        };
        if (pipe2(p->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                return negative_errno();
        /* What the pipe really holds (a user over its limit gets less than the default). */
        r = fcntl(p->pipe[1], F_GETPIPE_SZ);
        p->pipe_size = r > 0 ? (size_t) r : PUMP_PIPE_DEFAULT;
        return 0;
}

void pump_done(Pump *p) {
        pipes_grown_bytes -= MIN(p->pipe_grown, pipes_grown_bytes);
        p->pipe_grown = 0;
        p->pipe[0] = safe_close(p->pipe[0]);
        p->pipe[1] = safe_close(p->pipe[1]);
        p->queue = mfree(p->queue);
        p->queue_size = p->queue_offset = 0;
}

void pump_queue(Pump *p, char *data, size_t size) {
        if (p->queue && p->queue_offset < p->queue_size) {
                /* Append to what is still waiting. */
                char *n = realloc(p->queue, p->queue_size + size);
                if (!n) {
                        free(data);
                        p->state = PUMP_FAILED;
                        p->error = -ENOMEM;
                        p->error_what = "queue";
                        return;
                }
                memcpy(n + p->queue_size, data, size);
                free(data);
                p->queue = n;
                p->queue_size += size;
                return;
        }
        free(p->queue);
        p->queue = data;
        p->queue_size = size;
        p->queue_offset = 0;
}

static bool queue_empty(const Pump *p) {
        return p->queue_offset >= p->queue_size;
}

static bool errno_is_transient(int e) {
        return e == EAGAIN || e == EINTR;
}

static void pump_fail(Pump *p, int error, const char *what) {
        p->state = PUMP_FAILED;
        p->error = error;
        p->error_what = what;
}

/* Write queued bytes. Return: 1 progress, 0 blocked or empty, <0 error. */
static int flush_queue(Pump *p) {
        ssize_t n;

        if (queue_empty(p))
                return 0;
        n = send(p->dst, p->queue + p->queue_offset, p->queue_size - p->queue_offset, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0)
                return errno_is_transient(errno) ? 0 : negative_errno();
        p->queue_offset += (size_t) n;
        p->bytes += (uint64_t) n;
        if (queue_empty(p)) {
                p->queue = mfree(p->queue);
                p->queue_size = p->queue_offset = 0;
        }
        return n > 0;
}

/*
 * Read up to COPY_CHUNK bytes from the source into a new buffer, once the queue is empty and the
 * source not at its end. Return: 1 with the buffer and its size (0: end of file), 0 when there is
 * nothing to do now, or -errno.
 */
static int read_chunk(Pump *p, char **ret_buf, size_t *ret_n) {
        _cleanup_free_ char *buf = NULL;
        ssize_t n;

        if (!queue_empty(p) || p->src_eof)
                return 0;
        buf = malloc(COPY_CHUNK);
        if (!buf)
                return -ENOMEM;
        n = recv(p->src, buf, COPY_CHUNK, MSG_DONTWAIT);
        if (n < 0)
                return errno_is_transient(errno) ? 0 : negative_errno();
        *ret_buf = STEAL(buf);
        *ret_n = (size_t) n;
        return 1;
}

/* Forward-proxy request bodies: read into user space, let the parser say where the message ends. */
static int run_body(Pump *p) {
        _cleanup_free_ char *buf = NULL;
        size_t n, consumed;
        int r;

        r = read_chunk(p, &buf, &n);
        if (r <= 0)
                return r;
        if (n == 0)
                /* The client went away before the end of its body: nothing sensible can follow. */
                return -EPIPE;
        r = proxy_request_feed_body(p->body, buf, n, &consumed);
        if (r < 0)
                return -EBADMSG;
        if (consumed > 0)
                pump_queue(p, STEAL(buf), consumed);
        if (r > 0)
                p->src_eof = true;      /* the message is complete: nothing more is read */
        return 1;
}

static int copy_chunk(Pump *p) {
        _cleanup_free_ char *buf = NULL;
        size_t n;
        int r;

        r = read_chunk(p, &buf, &n);
        if (r <= 0)
                return r;
        if (n == 0) {
                p->src_eof = true;
                return 1;
        }
        pump_queue(p, STEAL(buf), n);
        return 1;
}

/* One round of queue, refill and finish. Return: 1 progress, 0 none, <0 error (p->error_what set). */
static int pump_step(Pump *p) {
        bool progress = false;
        ssize_t n;
        int r;

        /* 1. Bytes queued in user space go first (head, early tunnel data, copied chunks). */
        r = flush_queue(p);
        if (r < 0) {
                p->error_what = "write";
                return r;
        }
        progress |= r > 0;

        /* 2. Refill, or splice source → pipe → destination. */
        if (p->body || p->copy_fallback) {
                r = p->body ? run_body(p) : copy_chunk(p);
                if (r < 0) {
                        p->error_what = r == -EBADMSG ? "request body" : "read";
                        return r;
                }
                progress |= r > 0;
        } else {
                if (!p->src_eof && p->in_pipe < p->pipe_size) {
                        n = splice(p->src, NULL, p->pipe[1], NULL, p->pipe_size - p->in_pipe,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n > 0) {
                                p->in_pipe += (size_t) n;
                                progress = true;
                                if (p->in_pipe >= p->pipe_size)
                                        pump_grow_pipe(p);      /* a full pipe: a bulk transfer */
                        } else if (n == 0) {
                                p->src_eof = true;
                                progress = true;
                        } else if (errno == EINVAL && p->in_pipe == 0) {
                                /* This kind of socket cannot splice: copy through user space instead. */
                                p->copy_fallback = true;
                                return 1;
                        } else if (!errno_is_transient(errno)) {
                                p->error_what = "read";
                                return negative_errno();
                        }
                }
                if (p->in_pipe > 0 && queue_empty(p)) {
                        n = splice(p->pipe[0], NULL, p->dst, NULL, p->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n > 0) {
                                p->in_pipe -= (size_t) n;
                                p->bytes += (uint64_t) n;
                                progress = true;
                        } else if (n < 0 && !errno_is_transient(errno)) {
                                p->error_what = "write";
                                return negative_errno();
                        }
                }
        }

        /* 3. Finished? Half-close, so that the other side sees our end of stream. */
        if (p->src_eof && p->in_pipe == 0 && queue_empty(p)) {
                if (p->shutdown_dst && shutdown(p->dst, SHUT_WR) < 0 && errno != ENOTCONN) {
                        p->error_what = "shutdown";
                        return negative_errno();
                }
                p->state = PUMP_DONE;
                progress = true;
        }
        return progress;
}

int pump_run(Pump *p) {
        bool any = false;

        /* A guard that fired (see handoff.h) ends the round: back to the event loop. */
        while (p->state == PUMP_RUNNING && !handoff_guard_fired()) {
                int r = pump_step(p);

                if (r < 0) {
                        pump_fail(p, r, p->error_what);
                        break;
                }
                if (r == 0)
                        break;
                any = true;
        }
        return any;
}

bool pump_wants_read(const Pump *p) {
        if (p->state != PUMP_RUNNING || p->src_eof)
                return false;
        if (p->body || p->copy_fallback)
                return queue_empty(p);
        /* Not while the pipe is full: a readable source would wake us for nothing, again and again. */
        return p->in_pipe < p->pipe_size;
}

bool pump_wants_write(const Pump *p) {
        return p->state == PUMP_RUNNING && (!queue_empty(p) || p->in_pipe > 0);
}
