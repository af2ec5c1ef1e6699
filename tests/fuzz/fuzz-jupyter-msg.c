/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The Jupyter message codec (src/kernel/jupyter-msg.c, jupyter-ws.c) on hostile input. The first
 * byte picks the form of the rest: 0 a legacy text frame, 1 a legacy binary frame, 2 a v1 binary
 * frame, 3 ZMQ frames split at '\n' (the first one the key). Whatever parses must encode again,
 * in every form, and decode to the same message; whatever does not is -EBADMSG with a reason.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/jupyter-msg.h"
#include "fuzz.h"

static bool same(const JupyterMsg *a, const JupyterMsg *b) {
        if (a->channel != b->channel || a->n_buffers != b->n_buffers ||
            !json_object_equal(a->header, b->header) || !json_object_equal(a->parent_header, b->parent_header) ||
            !json_object_equal(a->metadata, b->metadata) || !json_object_equal(a->content, b->content))
                return false;
        for (size_t i = 0; i < a->n_buffers; i++)
                if (a->buffers[i].iov_len != b->buffers[i].iov_len ||
                    memcmp(a->buffers[i].iov_base, b->buffers[i].iov_base, a->buffers[i].iov_len) != 0)
                        return false;
        return true;
}

static void check_round_trips(const JupyterMsg *m) {
        static const uint8_t key[] = "fuzz-key";
        JupyterMsg *back = NULL;
        struct iovec *f = NULL;
        const char *why = NULL;
        uint8_t *buf = NULL;
        size_t len, n;
        bool binary;

        for (int v1 = 0; v1 <= 1; v1++) {
                FUZZ_CHECK(jupyter_msg_to_ws(v1, m, &buf, &len, &binary) == 0);
                FUZZ_CHECK(binary == (v1 || m->n_buffers > 0));
                if (binary)
                        FUZZ_CHECK(jupyter_msg_from_ws_binary(v1, buf, len, &back, &why) == 0);
                else
                        FUZZ_CHECK(jupyter_msg_from_ws_text((const char *) buf, len, &back, &why) == 0);
                FUZZ_CHECK(same(m, back));
                back = jupyter_msg_free(back);
                free(buf);
        }
        FUZZ_CHECK(jupyter_msg_to_wire(m, key, sizeof(key) - 1, &f, &n) == 0);
        FUZZ_CHECK(jupyter_msg_from_wire(m->channel, f, n, key, sizeof(key) - 1, &back, &why) == 0);
        FUZZ_CHECK(same(m, back));
        jupyter_msg_free(back);
        /* another key never verifies */
        FUZZ_CHECK(jupyter_msg_from_wire(m->channel, f, n, (const uint8_t *) "k", 1, &back, &why) == -EBADMSG);
        jupyter_frames_free(f, n);
}

static int parse_wire(const uint8_t *data, size_t size, JupyterMsg **ret, const char **why) {
        struct iovec frames[64];
        size_t n = 0, start = 0;
        int r;

        for (size_t i = 0; i <= size && n < 64; i++)
                if (i == size || data[i] == '\n') {
                        frames[n++] = (struct iovec) { .iov_base = (void *) (data + start), .iov_len = i - start };
                        start = i + 1;
                }
        if (n == 0)
                return -EBADMSG;
        r = jupyter_msg_from_wire(JUPYTER_CHANNEL_IOPUB, frames + 1, n - 1, frames[0].iov_base, frames[0].iov_len,
                                  ret, why);
        return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        JupyterMsg *m = NULL;
        const char *why = NULL;
        char *text;
        int r;

        if (size < 1 || size > 256 * 1024)
                return 0;
        switch (data[0] % 4) {
        case 0:
                text = fuzz_strndup(data + 1, size - 1);
                r = jupyter_msg_from_ws_text(text, size - 1, &m, &why);
                free(text);
                break;
        case 1:
        case 2:
                r = jupyter_msg_from_ws_binary(data[0] % 4 == 2, data + 1, size - 1, &m, &why);
                break;
        default:
                r = parse_wire(data + 1, size - 1, &m, &why);
        }
        FUZZ_CHECK(r == 0 || r == -EBADMSG);
        FUZZ_CHECK((r == 0) == !!m);
        if (r < 0) {
                FUZZ_CHECK(why && *why);
                return 0;
        }
        FUZZ_CHECK(jupyter_msg_id(m) && jupyter_msg_type(m));
        check_round_trips(m);
        jupyter_msg_free(m);
        return 0;
}
