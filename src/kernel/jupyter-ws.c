/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The two WebSocket forms of a Jupyter message (jupyter-msg.h): legacy (a text frame of JSON, or
 * the binary frame of u32 big-endian count and offsets when the message has buffers) and
 * "v1.kernel.websocket.jupyter.org" (u64 little-endian count and offsets, then channel, the four
 * parts and the buffers). Offsets and counts come from the client: every one is checked against
 * the frame before it is used. Pure code.
 */

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/jupyter-msg-internal.h"
#include "kernel/jupyter-msg.h"
#include "util/json-util.h"
#include "util/macro.h"

/* More buffers than any widget sends; bounds the iovec array a frame makes us allocate. */
#define JUPYTER_WS_MAX_BUFFERS 1024U

static json_object *part_or_empty(json_object *top, const char *key, const char **ret_error) {
        json_object *v;

        if (!json_object_object_get_ex(top, key, &v) || json_object_is_type(v, json_type_null))
                return json_object_new_object();
        if (!json_object_is_type(v, json_type_object)) {
                *ret_error = "header, parent_header, metadata and content must be JSON objects";
                return NULL;
        }
        return json_object_get(v);
}

/* The legacy JSON object of a text frame, or the first part of a legacy binary frame. */
static int msg_from_ws_json(json_object *top, JupyterMsg **ret, const char **ret_error) {
        _cleanup_jupyter_msg_ JupyterMsg *m = NULL;
        json_object *v;
        int r;

        if (!json_object_is_type(top, json_type_object)) {
                *ret_error = "a message must be a JSON object";
                return -EBADMSG;
        }
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->channel = JUPYTER_CHANNEL_SHELL;
        if (json_object_object_get_ex(top, "channel", &v) && !json_object_is_type(v, json_type_null)) {
                m->channel = json_object_is_type(v, json_type_string) ?
                        jupyter_channel_from_string(json_object_get_string(v)) : _JUPYTER_CHANNEL_INVALID;
                if (m->channel < 0) {
                        *ret_error = "unknown channel";
                        return -EBADMSG;
                }
        }
        if (!json_object_object_get_ex(top, "header", &v) || !json_object_is_type(v, json_type_object)) {
                *ret_error = "a message needs a header object";
                return -EBADMSG;
        }
        m->header = json_object_get(v);
        m->parent_header = part_or_empty(top, "parent_header", ret_error);
        if (m->parent_header)
                m->metadata = part_or_empty(top, "metadata", ret_error);
        if (m->metadata)
                m->content = part_or_empty(top, "content", ret_error);
        if (!m->content)
                return *ret_error ? -EBADMSG : -ENOMEM;
        r = jupyter_msg_check_header(m, ret_error);
        if (r < 0)
                return r;
        *ret = STEAL(m);
        return 0;
}

static int msg_from_ws_text(const char *data, size_t len, JupyterMsg **ret, const char **ret_error) {
        _cleanup_(json_object_putp) json_object *top = NULL;
        int r;

        r = jupyter_json_part(data, len, &top, ret_error);
        if (r < 0)
                return r;
        return msg_from_ws_json(top, ret, ret_error);
}

int jupyter_msg_from_ws_text(const char *data, size_t len, JupyterMsg **ret, const char **ret_error) {
        *ret_error = NULL;
        return msg_from_ws_text(data, len, ret, ret_error);
}

static uint64_t read_offset(bool v1, const uint8_t *p) {
        uint64_t v64;
        uint32_t v32;

        if (v1) {
                memcpy(&v64, p, sizeof(v64));
                return le64toh(v64);
        }
        memcpy(&v32, p, sizeof(v32));
        return be32toh(v32);
}

/*
 * The count and offsets at the start of a binary frame, checked: @w is 4 (legacy) or 8 (v1); the
 * offsets must lie between the end of the table and the end of the frame, in order. The parts are
 * then [off[i], off[i+1]), the last one to the end of the frame (legacy) or ending at the last
 * offset, which must be the frame's end (v1).
 */
static int binary_offsets(bool v1, const uint8_t *data, size_t len, uint64_t **ret, size_t *ret_n,
                          const char **ret_error) {
        size_t w = v1 ? 8 : 4, n;
        _cleanup_free_ uint64_t *off = NULL;
        uint64_t count;

        if (len < w) {
                *ret_error = "binary frame shorter than its count";
                return -EBADMSG;
        }
        count = read_offset(v1, data);
        /* legacy: the JSON and the buffers; v1: channel start, its end, the ends of four parts */
        if (count < (v1 ? 6U : 1U) || count > (v1 ? 6U : 1U) + JUPYTER_WS_MAX_BUFFERS) {
                *ret_error = "binary frame with a bad part count";
                return -EBADMSG;
        }
        n = (size_t) count;
        if ((len - w) / w < n) {
                *ret_error = "binary frame shorter than its offset table";
                return -EBADMSG;
        }
        off = calloc(n, sizeof(*off));
        if (!off)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                off[i] = read_offset(v1, data + w * (i + 1));
                if (off[i] < w * (n + 1) || off[i] > len || (i > 0 && off[i] < off[i - 1])) {
                        *ret_error = "binary frame with an offset out of range";
                        return -EBADMSG;
                }
        }
        if (v1 && off[n - 1] != len) {
                *ret_error = "binary frame whose last offset is not its end";
                return -EBADMSG;
        }
        *ret = STEAL(off);
        *ret_n = n;
        return 0;
}

static int msg_add_buffers(JupyterMsg *m, const struct iovec *src, size_t n) {
        if (n == 0)
                return 0;
        m->buffers = calloc(n, sizeof(struct iovec));
        if (!m->buffers)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                m->buffers[i].iov_base = malloc(src[i].iov_len + 1);
                if (!m->buffers[i].iov_base)
                        return -ENOMEM;
                memcpy(m->buffers[i].iov_base, (const uint8_t *) src[i].iov_base, src[i].iov_len);
                m->buffers[i].iov_len = src[i].iov_len;
                m->n_buffers++;
        }
        return 0;
}

static int channel_from_bytes(const uint8_t *p, size_t len, JupyterChannel *ret) {
        char name[16];

        if (len == 0 || len >= sizeof(name) || memchr(p, '\0', len))
                return -EBADMSG;
        memcpy(name, p, len);
        name[len] = '\0';
        *ret = jupyter_channel_from_string(name);
        return *ret < 0 ? -EBADMSG : 0;
}

int jupyter_msg_from_ws_binary(bool v1, const uint8_t *data, size_t len, JupyterMsg **ret, const char **ret_error) {
        _cleanup_jupyter_msg_ JupyterMsg *m = NULL;
        _cleanup_free_ struct iovec *parts = NULL;
        _cleanup_free_ uint64_t *off = NULL;
        JupyterChannel channel;
        size_t n;
        int r;

        *ret_error = NULL;
        r = binary_offsets(v1, data, len, &off, &n, ret_error);
        if (r < 0)
                return r;
        parts = calloc(n, sizeof(*parts));
        if (!parts)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                uint64_t end = i + 1 < n ? off[i + 1] : len;

                parts[i] = (struct iovec) { .iov_base = (void *) (data + off[i]), .iov_len = (size_t) (end - off[i]) };
        }
        if (!v1) {
                r = msg_from_ws_text(parts[0].iov_base, parts[0].iov_len, &m, ret_error);
                if (r < 0)
                        return r;
                r = msg_add_buffers(m, parts + 1, n - 1);
                if (r < 0)
                        return r;
                *ret = STEAL(m);
                return 0;
        }
        /* v1: parts[0] is the channel, parts[n - 1] is empty (the last offset is the end). */
        if (channel_from_bytes(parts[0].iov_base, parts[0].iov_len, &channel) < 0) {
                *ret_error = "unknown channel";
                return -EBADMSG;
        }
        return jupyter_msg_from_parts(channel, parts + 1, n - 2, ret, ret_error);
}

static int ws_json_object(bool with_buffers_key, const JupyterMsg *m, json_object **ret) {
        _cleanup_(json_object_putp) json_object *top = json_object_new_object();
        const char *id = jupyter_msg_id(m), *type = jupyter_msg_type(m);

        if (!top)
                return -ENOMEM;
        if (json_add(top, "header", json_object_get(m->header)) < 0 ||
            json_add(top, "parent_header", json_object_get(m->parent_header)) < 0 ||
            json_add(top, "metadata", json_object_get(m->metadata)) < 0 ||
            json_add(top, "content", json_object_get(m->content)) < 0 ||
            (with_buffers_key && json_add(top, "buffers", json_object_new_array()) < 0) ||
            json_add(top, "channel", json_object_new_string(jupyter_channel_to_string(m->channel))) < 0 ||
            (id && json_add(top, "msg_id", json_object_new_string(id)) < 0) ||
            (type && json_add(top, "msg_type", json_object_new_string(type)) < 0))
                return -ENOMEM;
        *ret = STEAL(top);
        return 0;
}

/* A binary frame of @n parts: the count, @n offsets (@w bytes each, v1: @n + 1, the end too), the parts. */
static int binary_frame(bool v1, const struct iovec *parts, size_t n, uint8_t **ret, size_t *ret_len) {
        size_t w = v1 ? 8 : 4, n_off = v1 ? n + 1 : n, total = w * (n_off + 1), pos;
        _cleanup_free_ uint8_t *buf = NULL;

        for (size_t i = 0; i < n; i++)
                total += parts[i].iov_len;
        if (!v1 && total > UINT32_MAX)
                return -E2BIG;
        buf = malloc(total);
        if (!buf)
                return -ENOMEM;
        pos = w * (n_off + 1);
        for (size_t i = 0; i <= n_off; i++) {
                uint64_t v = i == 0 ? n_off : (uint64_t) pos;

                if (v1) {
                        uint64_t le = htole64(v);
                        memcpy(buf + w * i, &le, w);
                } else {
                        uint32_t be = htobe32((uint32_t) v);
                        memcpy(buf + w * i, &be, w);
                }
                if (i > 0 && i - 1 < n) {
                        memcpy(buf + pos, parts[i - 1].iov_base, parts[i - 1].iov_len);
                        pos += parts[i - 1].iov_len;
                }
        }
        *ret = STEAL(buf);
        *ret_len = total;
        return 0;
}

static int to_ws_binary(bool v1, const JupyterMsg *m, uint8_t **ret, size_t *ret_len) {
        _cleanup_(json_object_putp) json_object *top = NULL;
        _cleanup_free_ struct iovec *parts = NULL;
        json_object *json[4] = { m->header, m->parent_header, m->metadata, m->content };
        size_t n = (v1 ? 5 : 1) + m->n_buffers, first;
        const char *t;
        int r;

        parts = calloc(n, sizeof(*parts));
        if (!parts)
                return -ENOMEM;
        if (v1) {
                t = jupyter_channel_to_string(m->channel);
                parts[0] = (struct iovec) { .iov_base = (void *) t, .iov_len = strlen(t) };
                for (size_t i = 0; i < 4; i++) {
                        t = json_object_to_json_string_length(json[i], JSON_C_TO_STRING_PLAIN, &parts[i + 1].iov_len);
                        if (!t)
                                return -ENOMEM;
                        parts[i + 1].iov_base = (void *) t;
                }
                first = 5;
        } else {
                r = ws_json_object(false, m, &top);
                if (r < 0)
                        return r;
                t = json_object_to_json_string_length(top, JSON_C_TO_STRING_PLAIN, &parts[0].iov_len);
                if (!t)
                        return -ENOMEM;
                parts[0].iov_base = (void *) t;
                first = 1;
        }
        for (size_t i = 0; i < m->n_buffers; i++)
                parts[first + i] = m->buffers[i];
        return binary_frame(v1, parts, n, ret, ret_len);
}

int jupyter_msg_to_ws(bool v1, const JupyterMsg *m, uint8_t **ret, size_t *ret_len, bool *ret_binary) {
        _cleanup_(json_object_putp) json_object *top = NULL;
        const char *t;
        size_t len;
        uint8_t *buf;
        int r;

        if (m->channel < 0 || m->channel >= _JUPYTER_CHANNEL_MAX)
                return -EINVAL;
        if (v1 || m->n_buffers > 0) {
                r = to_ws_binary(v1, m, ret, ret_len);
                if (r < 0)
                        return r;
                *ret_binary = true;
                return 0;
        }
        r = ws_json_object(true, m, &top);
        if (r < 0)
                return r;
        t = json_object_to_json_string_length(top, JSON_C_TO_STRING_PLAIN, &len);
        if (!t)
                return -ENOMEM;
        buf = malloc(len + 1);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, t, len + 1);
        *ret = buf;
        *ret_len = len;
        *ret_binary = false;
        return 0;
}
