/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/kernel/jupyter-msg.c and jupyter-ws.c: new messages, the ZMQ wire form and its
 * signature (a vector from Python's hmac, forged and duplicate signatures), the legacy and v1
 * WebSocket forms in both directions, and hostile frames (truncated offset tables, huge counts,
 * offsets out of order, non-object parts, non-UTF-8).
 */

#include <endian.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernel/jupyter-msg.h"
#include "util/json-util.h"

static const uint8_t key[] = "0123456789abcdef";
#define KEY_LEN (sizeof(key) - 1)

static struct iovec iov_str(const char *s) {
        return (struct iovec) { .iov_base = (void *) s, .iov_len = strlen(s) };
}

static JupyterMsg *new_execute(const char *code) {
        JupyterMsg *m = NULL;
        json_object *c = json_object_new_object();

        assert_non_null(c);
        assert_int_equal(json_add(c, "code", json_object_new_string(code)), 0);
        assert_int_equal(jupyter_msg_new(JUPYTER_CHANNEL_SHELL, "execute_request", "sess", NULL, c, &m), 0);
        return m;
}

static void add_buffer(JupyterMsg *m, const void *p, size_t n) {
        m->buffers = realloc(m->buffers, (m->n_buffers + 1) * sizeof(struct iovec));
        assert_non_null(m->buffers);
        m->buffers[m->n_buffers].iov_base = malloc(n + 1);
        assert_non_null(m->buffers[m->n_buffers].iov_base);
        memcpy(m->buffers[m->n_buffers].iov_base, p, n);
        m->buffers[m->n_buffers++].iov_len = n;
}

static void assert_same_msg(const JupyterMsg *a, const JupyterMsg *b) {
        assert_int_equal(a->channel, b->channel);
        assert_true(json_object_equal(a->header, b->header));
        assert_true(json_object_equal(a->parent_header, b->parent_header));
        assert_true(json_object_equal(a->metadata, b->metadata));
        assert_true(json_object_equal(a->content, b->content));
        assert_int_equal(a->n_buffers, b->n_buffers);
        for (size_t i = 0; i < a->n_buffers; i++) {
                assert_int_equal(a->buffers[i].iov_len, b->buffers[i].iov_len);
                assert_memory_equal(a->buffers[i].iov_base, b->buffers[i].iov_base, a->buffers[i].iov_len);
        }
}

static void test_channels_and_uuids(void **state) {
        char u[JUPYTER_UUID_LEN + 1], v[JUPYTER_UUID_LEN + 1];

        for (JupyterChannel c = 0; c < _JUPYTER_CHANNEL_MAX; c++)
                assert_int_equal(jupyter_channel_from_string(jupyter_channel_to_string(c)), c);
        assert_int_equal(jupyter_channel_from_string("hb"), -EINVAL);
        assert_null(jupyter_channel_to_string(_JUPYTER_CHANNEL_MAX));

        assert_int_equal(jupyter_uuid_new(u), 0);
        assert_int_equal(jupyter_uuid_new(v), 0);
        assert_true(jupyter_uuid_valid(u));
        assert_string_not_equal(u, v);
        assert_int_equal(u[14], '4');
        assert_non_null(strchr("89ab", u[19]));
        assert_false(jupyter_uuid_valid("0123456789abcdef0123456789abcdef0123"));
        assert_false(jupyter_uuid_valid("0123456-789a-4bcd-8f01-23456789abcd0"));
        assert_false(jupyter_uuid_valid("g1234567-89ab-4cde-8f01-23456789abcd"));
        assert_false(jupyter_uuid_valid(NULL));
}

static void test_new(void **state) {
        _cleanup_jupyter_msg_ JupyterMsg *p = new_execute("1"), *m = NULL;
        json_object *v;
        const char *date;

        assert_int_equal(jupyter_msg_new(JUPYTER_CHANNEL_IOPUB, "status", "s2", p, NULL, &m), 0);
        assert_string_equal(jupyter_msg_type(m), "status");
        assert_true(jupyter_uuid_valid(jupyter_msg_id(m)));
        assert_string_equal(jupyter_msg_parent_id(m), jupyter_msg_id(p));
        assert_true(json_object_object_get_ex(m->header, "date", &v));
        date = json_object_get_string(v);
        /* %Y-%m-%dT%H:%M:%S.%fZ */
        assert_int_equal(strlen(date), 27);
        assert_int_equal(date[10], 'T');
        assert_int_equal(date[19], '.');
        assert_int_equal(date[26], 'Z');
        assert_true(json_object_object_get_ex(m->header, "version", &v));
        assert_string_equal(json_object_get_string(v), "5.3");
        assert_true(json_object_object_get_ex(m->header, "username", &v));
        assert_string_equal(json_object_get_string(v), "sandbox-runner");
        assert_int_equal(json_object_object_length(m->content), 0);

        assert_int_equal(jupyter_msg_new(JUPYTER_CHANNEL_SHELL, "", "s", NULL, NULL, &m), -EINVAL);
        assert_int_equal(jupyter_msg_new(JUPYTER_CHANNEL_SHELL, "x", "s", NULL, json_object_new_array(), &m),
                         -EINVAL);
}

static void test_wire_round_trip(void **state) {
        _cleanup_jupyter_msg_ JupyterMsg *m = new_execute("print('é')"), *back = NULL;
        struct iovec *f = NULL, *with_ids;
        size_t n;
        const char *why = NULL;

        add_buffer(m, "\0\1\2", 3);
        add_buffer(m, "", 0);
        assert_int_equal(jupyter_msg_to_wire(m, key, KEY_LEN, &f, &n), 0);
        assert_int_equal(n, 8);
        assert_int_equal(f[0].iov_len, 9);
        assert_memory_equal(f[0].iov_base, "<IDS|MSG>", 9);
        assert_int_equal(f[1].iov_len, 64);

        assert_int_equal(jupyter_msg_from_wire(JUPYTER_CHANNEL_SHELL, f, n, key, KEY_LEN, &back, &why), 0);
        assert_same_msg(m, back);
        back = jupyter_msg_free(back);

        /* identities before the delimiter are skipped */
        with_ids = calloc(n + 2, sizeof(*with_ids));
        assert_non_null(with_ids);
        with_ids[0] = iov_str("ident-1");
        with_ids[1] = iov_str("ident-2");
        memcpy(with_ids + 2, f, n * sizeof(*f));
        assert_int_equal(jupyter_msg_from_wire(JUPYTER_CHANNEL_SHELL, with_ids, n + 2, key, KEY_LEN, &back, &why), 0);
        assert_same_msg(m, back);
        free(with_ids);
        jupyter_frames_free(f, n);
}

static void test_wire_known_signature(void **state) {
        /* hmac.new(b"0123456789abcdef", header+parent+metadata+content, sha256).hexdigest() in Python */
        struct iovec f[6] = {
                iov_str("<IDS|MSG>"),
                iov_str("b9df13a4c0de209e4ce68b17bd7108a53b7f2c9ea4706b82345a17323013d904"),
                iov_str("{\"msg_id\":\"a\",\"msg_type\":\"t\"}"), iov_str("{}"), iov_str("{}"), iov_str("{\"x\":1}"),
        };
        _cleanup_jupyter_msg_ JupyterMsg *m = NULL;
        const char *why = NULL;

        assert_int_equal(jupyter_msg_from_wire(JUPYTER_CHANNEL_IOPUB, f, 6, key, KEY_LEN, &m, &why), 0);
        assert_string_equal(jupyter_msg_type(m), "t");
        assert_int_equal(m->channel, JUPYTER_CHANNEL_IOPUB);

        /* one hex digit changed */
        f[1] = iov_str("b9df13a4c0de209e4ce68b17bd7108a53b7f2c9ea4706b82345a17323013d905");
        assert_int_equal(jupyter_msg_from_wire(JUPYTER_CHANNEL_IOPUB, f, 6, key, KEY_LEN, &m, &why), -EBADMSG);
        assert_string_equal(why, "invalid signature");
        /* upper case is not what the kernel sends */
        f[1] = iov_str("B9DF13A4C0DE209E4CE68B17BD7108A53B7F2C9EA4706B82345A17323013D904");
        assert_int_equal(jupyter_msg_from_wire(JUPYTER_CHANNEL_IOPUB, f, 6, key, KEY_LEN, &m, &why), -EBADMSG);
        /* truncated, empty, longer */
        f[1] = iov_str("b9df13a4c0de209e4ce68b17bd7108a53b7f2c9ea4706b82345a17323013d9");
        assert_int_equal(jupyter_msg_from_wire(JUPYTER_CHANNEL_IOPUB, f, 6, key, KEY_LEN, &m, &why), -EBADMSG);
        f[1] = iov_str("");
        assert_int_equal(jupyter_msg_from_wire(JUPYTER_CHANNEL_IOPUB, f, 6, key, KEY_LEN, &m, &why), -EBADMSG);
        f[1] = iov_str("b9df13a4c0de209e4ce68b17bd7108a53b7f2c9ea4706b82345a17323013d90400");
        assert_int_equal(jupyter_msg_from_wire(JUPYTER_CHANNEL_IOPUB, f, 6, key, KEY_LEN, &m, &why), -EBADMSG);
        /* the right signature, content forged */
        f[1] = iov_str("b9df13a4c0de209e4ce68b17bd7108a53b7f2c9ea4706b82345a17323013d904");
        f[5] = iov_str("{\"x\":2}");
        assert_int_equal(jupyter_msg_from_wire(JUPYTER_CHANNEL_IOPUB, f, 6, key, KEY_LEN, &m, &why), -EBADMSG);
        assert_string_equal(why, "invalid signature");
        /* another key */
        f[5] = iov_str("{\"x\":1}");
        assert_int_equal(jupyter_msg_from_wire(JUPYTER_CHANNEL_IOPUB, f, 6, (const uint8_t *) "other", 5, &m, &why),
                         -EBADMSG);
        /* no key: unsigned, accepted */
        m = jupyter_msg_free(m);
        f[1] = iov_str("");
        assert_int_equal(jupyter_msg_from_wire(JUPYTER_CHANNEL_IOPUB, f, 6, NULL, 0, &m, &why), 0);
}

static void test_wire_duplicate(void **state) {
        _cleanup_jupyter_msg_ JupyterMsg *m = new_execute("x"), *back = NULL;
        JupyterDigestHistory *h = NULL;
        struct iovec *f = NULL;
        const char *why = NULL;
        size_t n;

        assert_int_equal(jupyter_digest_history_new(&h), 0);
        assert_int_equal(jupyter_msg_to_wire(m, key, KEY_LEN, &f, &n), 0);
        assert_int_equal(jupyter_msg_from_wire_dedup(JUPYTER_CHANNEL_SHELL, f, n, key, KEY_LEN, h, &back, &why), 0);
        back = jupyter_msg_free(back);
        assert_int_equal(jupyter_msg_from_wire_dedup(JUPYTER_CHANNEL_SHELL, f, n, key, KEY_LEN, h, &back, &why),
                         -EBADMSG);
        assert_string_equal(why, "duplicate signature");
        jupyter_frames_free(f, n);

        /* the history forgets the oldest past its size: the ring wraps without trouble */
        for (unsigned i = 0; i < JUPYTER_DIGEST_HISTORY_MAX + 10; i++) {
                _cleanup_jupyter_msg_ JupyterMsg *x = new_execute("y");

                assert_int_equal(jupyter_msg_to_wire(x, key, KEY_LEN, &f, &n), 0);
                assert_int_equal(jupyter_msg_from_wire_dedup(JUPYTER_CHANNEL_SHELL, f, n, key, KEY_LEN, h, &back,
                                                             &why), 0);
                back = jupyter_msg_free(back);
                jupyter_frames_free(f, n);
        }
        jupyter_digest_history_free(h);
}

static void wire_refused(struct iovec *f, size_t n, const char *expected_why) {
        _cleanup_jupyter_msg_ JupyterMsg *m = NULL;
        const char *why = NULL;

        assert_int_equal(jupyter_msg_from_wire(JUPYTER_CHANNEL_SHELL, f, n, NULL, 0, &m, &why), -EBADMSG);
        assert_null(m);
        assert_non_null(why);
        if (expected_why)
                assert_string_equal(why, expected_why);
}

static void test_wire_hostile(void **state) {
        struct iovec f[6] = { iov_str("<IDS|MSG>"), iov_str(""), iov_str("{\"msg_id\":\"a\",\"msg_type\":\"t\"}"),
                              iov_str("{}"), iov_str("{}"), iov_str("{}") };

        wire_refused(f + 1, 5, "no <IDS|MSG> delimiter");
        wire_refused(f, 5, NULL);
        f[5] = iov_str("[]");
        wire_refused(f, 6, "a part is not a JSON object");
        f[5] = iov_str("{\"a\":\"\xff\"}");
        wire_refused(f, 6, "a part is not valid UTF-8");
        f[5] = iov_str("{\"a\":\"\x01\"}");
        wire_refused(f, 6, NULL);
        f[5] = iov_str("{} {}");
        wire_refused(f, 6, NULL);
        f[5] = (struct iovec) { .iov_base = (void *) "{}\0", .iov_len = 3 };
        wire_refused(f, 6, NULL);
        f[5] = iov_str("{}");
        f[2] = iov_str("{\"msg_type\":\"t\"}");
        wire_refused(f, 6, "the header needs string msg_id and msg_type");
        f[2] = iov_str("{\"msg_id\":1,\"msg_type\":\"t\"}");
        wire_refused(f, 6, "the header needs string msg_id and msg_type");
}

static void test_ws_text(void **state) {
        _cleanup_jupyter_msg_ JupyterMsg *m = new_execute("x = 1"), *back = NULL;
        _cleanup_(json_object_putp) json_object *top = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        const char *why = NULL;
        json_object *v;
        size_t len;
        bool binary = true;

        m->channel = JUPYTER_CHANNEL_CONTROL;
        assert_int_equal(jupyter_msg_to_ws(false, m, &buf, &len, &binary), 0);
        assert_false(binary);
        assert_int_equal(strlen((char *) buf), len);
        top = json_tokener_parse((char *) buf);
        assert_non_null(top);
        assert_true(json_object_object_get_ex(top, "msg_type", &v));
        assert_string_equal(json_object_get_string(v), "execute_request");
        assert_true(json_object_object_get_ex(top, "msg_id", &v));
        assert_string_equal(json_object_get_string(v), jupyter_msg_id(m));
        assert_true(json_object_object_get_ex(top, "channel", &v));
        assert_string_equal(json_object_get_string(v), "control");
        assert_true(json_object_object_get_ex(top, "buffers", &v));
        assert_int_equal(json_object_array_length(v), 0);

        assert_int_equal(jupyter_msg_from_ws_text((char *) buf, len, &back, &why), 0);
        assert_same_msg(m, back);
        back = jupyter_msg_free(back);

        /* what DocsGPT sends: no date, a signature we ignore, no channel means shell */
        static const char docsgpt[] =
                "{\"header\":{\"msg_id\":\"m1\",\"username\":\"docsgpt\",\"session\":\"s\",\"msg_type\":"
                "\"execute_request\",\"version\":\"5.3\"},\"parent_header\":{},\"signature\":\"forged\","
                "\"content\":{\"code\":\"1\"}}";
        assert_int_equal(jupyter_msg_from_ws_text(docsgpt, strlen(docsgpt), &back, &why), 0);
        assert_int_equal(back->channel, JUPYTER_CHANNEL_SHELL);
        assert_string_equal(jupyter_msg_id(back), "m1");
        assert_int_equal(json_object_object_length(back->metadata), 0);
}

static void ws_text_refused(const char *text, const char *expected_why) {
        _cleanup_jupyter_msg_ JupyterMsg *m = NULL;
        const char *why = NULL;

        assert_int_equal(jupyter_msg_from_ws_text(text, strlen(text), &m, &why), -EBADMSG);
        assert_null(m);
        assert_non_null(why);
        if (expected_why)
                assert_string_equal(why, expected_why);
}

static void test_ws_text_hostile(void **state) {
        ws_text_refused("", NULL);
        ws_text_refused("{", "a part is not JSON");
        ws_text_refused("[]", "a part is not a JSON object");
        ws_text_refused("{\"channel\":\"shell\"}", "a message needs a header object");
        ws_text_refused("{\"header\":[]}", "a message needs a header object");
        ws_text_refused("{\"header\":{\"msg_id\":\"a\"}}", "the header needs string msg_id and msg_type");
        ws_text_refused("{\"header\":{\"msg_id\":\"a\",\"msg_type\":\"t\"},\"channel\":\"hb\"}", "unknown channel");
        ws_text_refused("{\"header\":{\"msg_id\":\"a\",\"msg_type\":\"t\"},\"channel\":1}", "unknown channel");
        ws_text_refused("{\"header\":{\"msg_id\":\"a\",\"msg_type\":\"t\"},\"content\":\"x\"}",
                        "header, parent_header, metadata and content must be JSON objects");
        ws_text_refused("{\"header\":{\"msg_id\":\"\xc3\x28\",\"msg_type\":\"t\"}}", "a part is not valid UTF-8");
        ws_text_refused("{'header':{}}", NULL);
}

static void test_ws_binary_round_trip(void **state) {
        for (int v1 = 0; v1 <= 1; v1++) {
                _cleanup_jupyter_msg_ JupyterMsg *m = new_execute("b"), *back = NULL;
                _cleanup_free_ uint8_t *buf = NULL;
                const char *why = NULL;
                size_t len;
                bool binary = false;

                m->channel = JUPYTER_CHANNEL_STDIN;
                add_buffer(m, "abc", 3);
                add_buffer(m, "\xff\x00\xfe", 3);
                assert_int_equal(jupyter_msg_to_ws(v1, m, &buf, &len, &binary), 0);
                assert_true(binary);
                assert_int_equal(jupyter_msg_from_ws_binary(v1, buf, len, &back, &why), 0);
                assert_same_msg(m, back);
                back = jupyter_msg_free(back);
                free(buf);
                buf = NULL;

                /* v1 without buffers: still binary; legacy without buffers: text */
                for (size_t i = 0; i < m->n_buffers; i++)
                        free(m->buffers[i].iov_base);
                m->n_buffers = 0;
                assert_int_equal(jupyter_msg_to_ws(v1, m, &buf, &len, &binary), 0);
                assert_int_equal(binary, !!v1);
                if (v1) {
                        uint64_t count;

                        memcpy(&count, buf, 8);
                        assert_int_equal(le64toh(count), 6);
                        assert_memory_equal(buf + 7 * 8, "stdin", 5);
                        assert_int_equal(jupyter_msg_from_ws_binary(true, buf, len, &back, &why), 0);
                        assert_same_msg(m, back);
                }
        }
}

static void ws_binary_refused(bool v1, const uint8_t *p, size_t len, const char *expected_why) {
        _cleanup_jupyter_msg_ JupyterMsg *m = NULL;
        const char *why = NULL;

        assert_int_equal(jupyter_msg_from_ws_binary(v1, p, len, &m, &why), -EBADMSG);
        assert_null(m);
        assert_non_null(why);
        if (expected_why)
                assert_string_equal(why, expected_why);
}

static void put64(uint8_t *p, uint64_t v) {
        v = htole64(v);
        memcpy(p, &v, 8);
}

static void put32(uint8_t *p, uint32_t v) {
        v = htobe32(v);
        memcpy(p, &v, 4);
}

static void test_ws_binary_hostile(void **state) {
        _cleanup_jupyter_msg_ JupyterMsg *m = new_execute("h");
        _cleanup_free_ uint8_t *buf = NULL;
        uint8_t small[64] = {};
        size_t len;
        bool binary;

        ws_binary_refused(false, small, 0, "binary frame shorter than its count");
        ws_binary_refused(true, small, 7, "binary frame shorter than its count");
        /* counts: zero, huge, past the frame */
        ws_binary_refused(false, small, 8, "binary frame with a bad part count");
        put32(small, UINT32_MAX);
        ws_binary_refused(false, small, sizeof(small), "binary frame with a bad part count");
        put64(small, UINT64_MAX);
        ws_binary_refused(true, small, sizeof(small), "binary frame with a bad part count");
        put64(small, 5);
        ws_binary_refused(true, small, sizeof(small), "binary frame with a bad part count");
        put32(small, 20);
        ws_binary_refused(false, small, sizeof(small), "binary frame shorter than its offset table");
        put64(small, 8);
        ws_binary_refused(true, small, sizeof(small), "binary frame shorter than its offset table");
        /* offsets inside the table, past the end */
        put32(small, 1);
        put32(small + 4, 4);
        ws_binary_refused(false, small, sizeof(small), "binary frame with an offset out of range");
        put32(small + 4, 65);
        ws_binary_refused(false, small, sizeof(small), "binary frame with an offset out of range");
        put32(small + 4, 8);
        ws_binary_refused(false, small, sizeof(small), "raw control characters are not allowed in JSON (escape them)");

        /* a good v1 frame, then damaged */
        add_buffer(m, "xyz", 3);
        assert_int_equal(jupyter_msg_to_ws(true, m, &buf, &len, &binary), 0);
        ws_binary_refused(true, buf, len - 1, "binary frame with an offset out of range");
        memcpy(buf + 8 * 8, "shelx", 5);
        ws_binary_refused(true, buf, len, NULL);
        memcpy(buf + 8 * 8, "shell", 5);
        put64(buf + 8 * 3, 8 * 8 + 2);         /* the header's end before its start */
        ws_binary_refused(true, buf, len, "binary frame with an offset out of range");
        free(buf);
        buf = NULL;

        /* legacy with a buffer: offsets out of order */
        assert_int_equal(jupyter_msg_to_ws(false, m, &buf, &len, &binary), 0);
        assert_true(binary);
        put32(buf + 8, 12);
        ws_binary_refused(false, buf, len, NULL);
        /* the JSON part cut short */
        put32(buf + 8, 20);
        ws_binary_refused(false, buf, len, "a part is not JSON");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_channels_and_uuids),
                cmocka_unit_test(test_new),
                cmocka_unit_test(test_wire_round_trip),
                cmocka_unit_test(test_wire_known_signature),
                cmocka_unit_test(test_wire_duplicate),
                cmocka_unit_test(test_wire_hostile),
                cmocka_unit_test(test_ws_text),
                cmocka_unit_test(test_ws_text_hostile),
                cmocka_unit_test(test_ws_binary_round_trip),
                cmocka_unit_test(test_ws_binary_hostile),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
