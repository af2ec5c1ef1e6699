/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One ZMQ socket of a kernel in the daemon's sd-event loop: its ZMQ_FD watched for input,
 * ZMQ_EVENTS drained until nothing is left (the fd is edge-like: it signals a change, not a
 * level), and drained again after every send, which can consume the signal. Multipart messages
 * go to a handler as frames.
 */
#pragma once

#include <stddef.h>
#include <sys/uio.h>
#include <systemd/sd-event.h>

typedef struct KernelSocket KernelSocket;

/* @frames are valid during the call only. The handler may free the socket. */
typedef void (*KernelSocketHandler)(KernelSocket *s, const struct iovec *frames, size_t n, void *userdata);

/* The largest frame taken from a kernel (a bigger one drops the connection, which ZMQ makes again;
 * DocsGPT moves files of ~14 MB in one stream message), and the most frames of one message. */
#define KERNEL_SOCKET_MAX_FRAME_BYTES (64ULL << 20)
#define KERNEL_SOCKET_RECONNECT_MSEC 10
#define KERNEL_SOCKET_MAX_FRAMES 1024U

/*
 * kernel_socket_new() - a ZMQ socket of @type (ZMQ_DEALER or ZMQ_SUB, the latter subscribed to
 * everything) connected to @endpoint, watched in @e. A DEALER queues nothing before its peer
 * listens (ZMQ_IMMEDIATE): sends fail with -EAGAIN until then. Return: 0 or -errno.
 */
int kernel_socket_new(void *zctx, sd_event *e, int type, const char *endpoint, const char *description,
                      KernelSocketHandler handler, void *userdata, KernelSocket **ret);
KernelSocket *kernel_socket_free(KernelSocket *s);

/* kernel_socket_send() - one multipart message, without blocking. Return: 0, -EAGAIN (the queue
 * to the kernel is full), or -errno. */
int kernel_socket_send(KernelSocket *s, const struct iovec *frames, size_t n);
