/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Moving bytes one way between two sockets: queued bytes first, then splice() through a pipe. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ProxyRequest ProxyRequest;

typedef enum PumpState {
        PUMP_RUNNING,
        PUMP_DONE,              /* source finished and everything was written (and SHUT_WR sent) */
        PUMP_FAILED,            /* a read or write error: the connection is to be torn down */
} PumpState;

/*
 * One direction of a relayed connection. The fds are borrowed. Bytes queued with pump_queue() go
 * out first; after them the source is spliced to the destination through a private pipe (zero
 * copy in user space), falling back to read()/write() where the kernel refuses to splice. With
 * a @body parser set, the source is instead read into user space and cut at the end of the HTTP
 * message that parser delimits (forward-proxy request bodies: nothing after them goes upstream).
 */
typedef struct Pump {
        int src;
        int dst;
        int pipe[2];
        size_t in_pipe;
        size_t pipe_size;       /* its capacity: 64 KiB, grown to 1 MiB for bulk transfers (relay.c) */
        size_t pipe_grown;      /* bytes of the process-wide budget for grown pipes held by this one */
        bool pipe_grow_failed;
        char *queue;
        size_t queue_size;
        size_t queue_offset;
        ProxyRequest *body;
        bool src_eof;
        bool shutdown_dst;      /* shutdown(dst, SHUT_WR) once the source is done */
        bool copy_fallback;
        PumpState state;
        int error;              /* -errno when PUMP_FAILED */
        uint64_t bytes;         /* written to dst, queued bytes included */
        const char *error_what; /* "read", "write", "request body" */
} Pump;

/* pump_init() - set up a direction; @shutdown_dst: half-close dst when the source ends. Return: 0 or -errno. */
int pump_init(Pump *p, int src, int dst, bool shutdown_dst);
void pump_done(Pump *p);

/* pump_queue() - take over @data (malloc'd, @size bytes) to send before anything else. */
void pump_queue(Pump *p, char *data, size_t size);

/*
 * pump_run() - move as much as the sockets take now, without blocking.
 * Return: 1 if any byte moved, 0 if nothing could; p->state tells whether it finished or failed.
 */
int pump_run(Pump *p);

/* What to wait for: the source readable, the destination writable. */
bool pump_wants_read(const Pump *p);
bool pump_wants_write(const Pump *p);
