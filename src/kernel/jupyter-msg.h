/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Jupyter messages (messaging protocol 5.3) and their three encodings: the ZMQ wire form the
 * kernel speaks (identities, "<IDS|MSG>", hex HMAC-SHA256 over header, parent_header, metadata
 * and content, the four parts, buffers), and the two WebSocket forms a Kernel Gateway client
 * speaks: legacy (a text frame of JSON with "channel", or for a message with buffers the binary
 * frame of u32 big-endian count and offsets), and "v1.kernel.websocket.jupyter.org" (u64
 * little-endian count and offsets, then channel, header, parent, metadata, content, buffers).
 * Pure code: no I/O, no event loop; every parser survives hostile input (SECURITY.md).
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <json-c/json.h>

typedef enum JupyterChannel {
        JUPYTER_CHANNEL_SHELL,
        JUPYTER_CHANNEL_CONTROL,
        JUPYTER_CHANNEL_STDIN,
        JUPYTER_CHANNEL_IOPUB,
        _JUPYTER_CHANNEL_MAX,
        _JUPYTER_CHANNEL_INVALID = -EINVAL,
} JupyterChannel;

const char *jupyter_channel_to_string(JupyterChannel c);
JupyterChannel jupyter_channel_from_string(const char *s);

typedef struct JupyterMsg {
        JupyterChannel channel;
        json_object *header;            /* owned references; all four always objects */
        json_object *parent_header;
        json_object *metadata;
        json_object *content;
        struct iovec *buffers;          /* owned copies */
        size_t n_buffers;
} JupyterMsg;

JupyterMsg *jupyter_msg_free(JupyterMsg *m);
static inline void jupyter_msg_freep(JupyterMsg **m) {
        if (*m)
                jupyter_msg_free(*m);
}
#define _cleanup_jupyter_msg_ __attribute__((__cleanup__(jupyter_msg_freep)))

/* A new message from the daemon: a fresh msg_id (UUID), date (ISO 8601 with microseconds, Z),
 * username "sandbox-runner", @session, version "5.3"; @parent's header as parent_header (or {});
 * takes the reference of @content (NULL: {}). */
int jupyter_msg_new(JupyterChannel channel, const char *msg_type, const char *session,
                    const JupyterMsg *parent, json_object *content, JupyterMsg **ret);

/* jupyter_msg_dup() - a copy of @m sharing its JSON parts (references) and copying its buffers:
 * what each of several receivers of one message gets. Return: 0 or -ENOMEM. */
int jupyter_msg_dup(const JupyterMsg *m, JupyterMsg **ret);

const char *jupyter_msg_type(const JupyterMsg *m);       /* header.msg_type, or NULL */
const char *jupyter_msg_id(const JupyterMsg *m);         /* header.msg_id, or NULL */
const char *jupyter_msg_parent_id(const JupyterMsg *m);  /* parent_header.msg_id, or NULL */

/* ZMQ wire form. @key: the kernel's HMAC key (the connection file's "key", its bytes as written);
 * an empty key means unsigned (never used by the daemon, accepted for completeness). to_wire()
 * fills @ret_frames (each iov_base malloc'd; free with jupyter_frames_free()) without identities:
 * the DEALER sockets the daemon uses need none. from_wire() skips identities up to "<IDS|MSG>",
 * verifies the signature in constant time and refuses a message without a valid one (-EBADMSG,
 * @ret_error says why). @channel is the socket's channel. */
int jupyter_msg_to_wire(const JupyterMsg *m, const uint8_t *key, size_t key_len,
                        struct iovec **ret_frames, size_t *ret_n);
int jupyter_msg_from_wire(JupyterChannel channel, const struct iovec *frames, size_t n,
                          const uint8_t *key, size_t key_len, JupyterMsg **ret, const char **ret_error);
void jupyter_frames_free(struct iovec *frames, size_t n);

/* The signatures a kernel's sockets already delivered (jupyter_client's digest_history): the last
 * JUPYTER_DIGEST_HISTORY_MAX of them; a message whose signature is among them is a replay. */
#define JUPYTER_DIGEST_HISTORY_MAX 4096U
typedef struct JupyterDigestHistory JupyterDigestHistory;
int jupyter_digest_history_new(JupyterDigestHistory **ret);
JupyterDigestHistory *jupyter_digest_history_free(JupyterDigestHistory *h);

/* jupyter_msg_from_wire_dedup() - jupyter_msg_from_wire(), and when @history is not NULL a valid
 * signature seen before is refused too (-EBADMSG, "duplicate signature"); a new one is remembered.
 * Return: 0, -EBADMSG with @ret_error, -ENOMEM. */
int jupyter_msg_from_wire_dedup(JupyterChannel channel, const struct iovec *frames, size_t n,
                                const uint8_t *key, size_t key_len, JupyterDigestHistory *history,
                                JupyterMsg **ret, const char **ret_error);

/* jupyter_uuid_new() - a random (version 4) UUID from getrandom(), 36 characters and a NUL into @ret.
 * Return: 0, or -errno from getrandom(). */
#define JUPYTER_UUID_LEN 36
int jupyter_uuid_new(char ret[static JUPYTER_UUID_LEN + 1]);
/* jupyter_uuid_valid() - whether @s is a UUID in canonical form (8-4-4-4-12 hex digits). */
bool jupyter_uuid_valid(const char *s);

/* WebSocket forms, client to daemon: a text frame (legacy JSON; no "channel" means shell) or a
 * binary frame (legacy with buffers, or v1 when @v1). Clients send unsigned messages: a
 * "signature" they carry is ignored; header must be an object with string msg_id and msg_type,
 * the other parts objects (absent: {}); anything else is -EBADMSG with @ret_error. Messages are
 * at most @max_bytes (checked by the caller on the frame; parsers never allocate past it). */
int jupyter_msg_from_ws_text(const char *data, size_t len, JupyterMsg **ret, const char **ret_error);
int jupyter_msg_from_ws_binary(bool v1, const uint8_t *data, size_t len, JupyterMsg **ret, const char **ret_error);

/* Daemon to client: legacy text (the parts, "channel", "buffers": [], and the top-level msg_id and
 * msg_type jupyter_client adds) for a message without buffers; a binary frame otherwise, or always
 * when @v1. *ret_binary says which frame type to send. */
int jupyter_msg_to_ws(bool v1, const JupyterMsg *m, uint8_t **ret, size_t *ret_len, bool *ret_binary);
