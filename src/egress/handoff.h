/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Connections handed over by sandbox-runner-bridge: the client's TCP socket itself, passed with SCM_RIGHTS. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * The hand-over protocol, on a fresh connection to the gateway's AF_UNIX socket: one message of
 * exactly one byte, HANDOFF_MARKER, carrying exactly one descriptor (SCM_RIGHTS): a connected
 * AF_INET/AF_INET6 SOCK_STREAM TCP socket. The gateway then reads the request head from, and
 * relays on, that socket, and closes the AF_UNIX connection (whose peer it has already
 * identified). No HTTP request starts with a NUL byte, so any other first byte means a plain
 * byte-stream client, served on the AF_UNIX connection itself.
 */
#define HANDOFF_MARKER '\0'

/*
 * handoff_receive() - the first read of an accepted AF_UNIX connection @fd: up to @size bytes into
 * @buf, and whatever descriptors came with them. Descriptors are kept only in the hand-over case;
 * any other received descriptor is closed (including those of a truncated control message).
 * Return: 1 = a hand-over: *ret_fd is the checked, non-blocking client socket (nothing in @buf);
 *         0 = a plain client: *ret_size bytes are in @buf (0 = end of stream);
 *         -EAGAIN = nothing to read yet; -EBADMSG = marker without exactly one descriptor, or
 *         with more bytes; -EPROTOTYPE (or another -errno from the checks) = the descriptor is
 *         not a connected TCP socket; other -errno = read error.
 */
int handoff_receive(int fd, char *buf, size_t size, size_t *ret_size, int *ret_fd);

/* handoff_check_socket() - is @fd a connected, non-listening TCP socket (IPv4 or IPv6)? Return: 0 or -errno. */
int handoff_check_socket(int fd);

/*
 * A passed socket shares its open file description with the sender, which can clear O_NONBLOCK
 * or set SO_LINGER behind our back at any time. recv()/send() take MSG_DONTWAIT, but splice()
 * and close() follow the file's flags, so they run under a guard: a one-shot timer that sends
 * the calling thread a signal with a handler that does nothing and no SA_RESTART, so a blocking
 * call ends with EINTR (or short) after HANDOFF_GUARD_USEC instead of stalling the gateway.
 *
 * handoff_guard_setup() - once, from the thread that runs the event loop. Return: 0 or -errno.
 * handoff_guard_arm() - before a guarded stretch (no-op without a guard set up).
 * handoff_guard_fired() - has it fired since it was armed? Loops that move data stop then, so
 * that a sender dribbling bytes cannot keep the gateway in one stretch.
 * handoff_guard_disarm() - after it. Return: true if the guard fired in between.
 * handoff_guard_close() - close(@fd) under the guard. Return: -EBADF.
 */
#define HANDOFF_GUARD_USEC (50U * 1000U)
int handoff_guard_setup(void);
bool handoff_guard_available(void);
void handoff_guard_arm(void);
bool handoff_guard_fired(void);
bool handoff_guard_disarm(void);
int handoff_guard_close(int fd);

/* handoff_socket_blocking() - has O_NONBLOCK been cleared on @fd (by whoever shares it)? */
bool handoff_socket_blocking(int fd);
