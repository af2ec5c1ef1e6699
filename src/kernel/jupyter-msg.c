/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Jupyter messages: the message object, new messages from the daemon, UUIDs, and the ZMQ wire form
 * with its HMAC-SHA256 signature (nettle) and the history of signatures already seen. The two
 * WebSocket forms are jupyter-ws.c's. Pure code but getrandom() and the clock.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "kernel/jupyter-msg-internal.h"
#include "kernel/jupyter-msg.h"
#include "util/hashmap.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/string-table.h"
#include "util/string-util.h"

#define DELIM "<IDS|MSG>"
#define SIG_HEX_LEN (SHA256_DIGEST_SIZE * 2)

static const char *const jupyter_channel_table[_JUPYTER_CHANNEL_MAX] = {
        [JUPYTER_CHANNEL_SHELL] = "shell",
        [JUPYTER_CHANNEL_CONTROL] = "control",
        [JUPYTER_CHANNEL_STDIN] = "stdin",
        [JUPYTER_CHANNEL_IOPUB] = "iopub",
};

DEFINE_STRING_TABLE_LOOKUP(jupyter_channel, JupyterChannel);

JupyterMsg *jupyter_msg_free(JupyterMsg *m) {
        if (!m)
                return NULL;
        json_object_put(m->header);
        json_object_put(m->parent_header);
        json_object_put(m->metadata);
        json_object_put(m->content);
        for (size_t i = 0; i < m->n_buffers; i++)
                free(m->buffers[i].iov_base);
        free(m->buffers);
        return mfree(m);
}

int jupyter_uuid_new(char ret[static JUPYTER_UUID_LEN + 1]) {
        uint8_t b[16];
        char hex[33];

        if (getrandom(b, sizeof(b), 0) != (ssize_t) sizeof(b))
                return negative_errno();
        b[6] = (uint8_t) ((b[6] & 0x0f) | 0x40);        /* version 4 */
        b[8] = (uint8_t) ((b[8] & 0x3f) | 0x80);        /* variant RFC 4122 */
        hex_encode(b, sizeof(b), hex);
        snprintf(ret, JUPYTER_UUID_LEN + 1, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16,
                 hex + 20);
        return 0;
}

bool jupyter_uuid_valid(const char *s) {
        if (!s || strlen(s) != JUPYTER_UUID_LEN)
                return false;
        for (size_t i = 0; i < JUPYTER_UUID_LEN; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;

                if (dash ? s[i] != '-' : !strchr("0123456789abcdefABCDEF", s[i]) || s[i] == '\0')
                        return false;
        }
        return true;
}

int jupyter_date_now(char ret[static JUPYTER_DATE_LEN + 1]) {
        struct timespec ts;
        struct tm tm;
        long usec;

        if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
                return negative_errno();
        if (!gmtime_r(&ts.tv_sec, &tm))
                return -EOVERFLOW;
        if (strftime(ret, JUPYTER_DATE_LEN + 1, "%Y-%m-%dT%H:%M:%S", &tm) != 19)
                return -EOVERFLOW;
        /* the microseconds and the Z are mandatory (jupyter_server's gateway client parses them) */
        usec = ts.tv_nsec / 1000;
        ret[19] = '.';
        for (int i = 25; i >= 20; i--, usec /= 10)
                ret[i] = (char) ('0' + usec % 10);
        ret[26] = 'Z';
        ret[27] = '\0';
        return 0;
}

static const char *msg_header_string(json_object *o, const char *key) {
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

const char *jupyter_msg_type(const JupyterMsg *m) {
        return msg_header_string(m->header, "msg_type");
}

const char *jupyter_msg_id(const JupyterMsg *m) {
        return msg_header_string(m->header, "msg_id");
}

const char *jupyter_msg_parent_id(const JupyterMsg *m) {
        return msg_header_string(m->parent_header, "msg_id");
}

static json_object *header_new(const char *msg_type, const char *session) {
        _cleanup_(json_object_putp) json_object *h = json_object_new_object();
        char id[JUPYTER_UUID_LEN + 1], date[JUPYTER_DATE_LEN + 1];

        if (!h || jupyter_uuid_new(id) < 0 || jupyter_date_now(date) < 0)
                return NULL;
        if (json_add(h, "msg_id", json_object_new_string(id)) < 0 ||
            json_add(h, "msg_type", json_object_new_string(msg_type)) < 0 ||
            json_add(h, "username", json_object_new_string("sandbox-runner")) < 0 ||
            json_add(h, "session", json_object_new_string(session ?: "")) < 0 ||
            json_add(h, "date", json_object_new_string(date)) < 0 ||
            json_add(h, "version", json_object_new_string(JUPYTER_PROTOCOL_VERSION)) < 0)
                return NULL;
        return STEAL(h);
}

int jupyter_msg_new(JupyterChannel channel, const char *msg_type, const char *session,
                    const JupyterMsg *parent, json_object *content, JupyterMsg **ret) {
        _cleanup_(json_object_putp) json_object *c = content;
        _cleanup_jupyter_msg_ JupyterMsg *m = NULL;

        if (channel < 0 || channel >= _JUPYTER_CHANNEL_MAX || isempty(msg_type))
                return -EINVAL;
        if (c && !json_object_is_type(c, json_type_object))
                return -EINVAL;
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->channel = channel;
        m->header = header_new(msg_type, session);
        m->parent_header = parent ? json_object_get(parent->header) : json_object_new_object();
        m->metadata = json_object_new_object();
        m->content = c ? STEAL(c) : json_object_new_object();
        if (!m->header || !m->parent_header || !m->metadata || !m->content)
                return -ENOMEM;
        *ret = STEAL(m);
        return 0;
}

static int iov_dup(struct iovec *iov, const void *p, size_t n) {
        /* One byte more, so that a zero-length frame still has a buffer of its own. */
        iov->iov_base = malloc(n + 1);
        if (!iov->iov_base)
                return -ENOMEM;
        if (n > 0)
                memcpy(iov->iov_base, p, n);
        iov->iov_len = n;
        return 0;
}

int jupyter_msg_dup(const JupyterMsg *m, JupyterMsg **ret) {
        _cleanup_jupyter_msg_ JupyterMsg *d = calloc(1, sizeof(*d));

        if (!d)
                return -ENOMEM;
        d->channel = m->channel;
        d->header = json_object_get(m->header);
        d->parent_header = json_object_get(m->parent_header);
        d->metadata = json_object_get(m->metadata);
        d->content = json_object_get(m->content);
        if (m->n_buffers > 0) {
                d->buffers = calloc(m->n_buffers, sizeof(struct iovec));
                if (!d->buffers)
                        return -ENOMEM;
                for (size_t i = 0; i < m->n_buffers; i++) {
                        if (iov_dup(&d->buffers[i], m->buffers[i].iov_base, m->buffers[i].iov_len) < 0)
                                return -ENOMEM;
                        d->n_buffers++;
                }
        }
        *ret = STEAL(d);
        return 0;
}

void jupyter_frames_free(struct iovec *frames, size_t n) {
        for (size_t i = 0; frames && i < n; i++)
                free(frames[i].iov_base);
        free(frames);
}

static void sign_parts(const uint8_t *key, size_t key_len, const struct iovec parts[4],
                       char ret[static SIG_HEX_LEN + 1]) {
        struct hmac_sha256_ctx ctx;
        uint8_t digest[SHA256_DIGEST_SIZE];

        hmac_sha256_set_key(&ctx, key_len, key);
        for (size_t i = 0; i < 4; i++)
                hmac_sha256_update(&ctx, parts[i].iov_len, parts[i].iov_base);
        hmac_sha256_digest(&ctx, sizeof(digest), digest);
        hex_encode(digest, sizeof(digest), ret);
        explicit_bzero(&ctx, sizeof(ctx));
}

int jupyter_msg_to_wire(const JupyterMsg *m, const uint8_t *key, size_t key_len,
                        struct iovec **ret_frames, size_t *ret_n) {
        json_object *parts[4] = { m->header, m->parent_header, m->metadata, m->content };
        struct iovec *f = NULL;
        size_t n = 6 + m->n_buffers;
        char sig[SIG_HEX_LEN + 1] = "";
        int r;

        for (size_t i = 0; i < 4; i++)
                if (!parts[i] || !json_object_is_type(parts[i], json_type_object))
                        return -EINVAL;
        f = calloc(n, sizeof(*f));
        if (!f)
                return -ENOMEM;
        r = iov_dup(&f[0], DELIM, strlen(DELIM));
        for (size_t i = 0; r >= 0 && i < 4; i++) {
                size_t len;
                const char *t = json_object_to_json_string_length(parts[i], JSON_C_TO_STRING_PLAIN, &len);

                r = t ? iov_dup(&f[2 + i], t, len) : -ENOMEM;
        }
        for (size_t i = 0; r >= 0 && i < m->n_buffers; i++)
                r = iov_dup(&f[6 + i], m->buffers[i].iov_base, m->buffers[i].iov_len);
        if (r >= 0 && key_len > 0)
                sign_parts(key, key_len, f + 2, sig);
        if (r >= 0)
                r = iov_dup(&f[1], sig, strlen(sig));
        if (r < 0) {
                jupyter_frames_free(f, n);
                return r;
        }
        *ret_frames = f;
        *ret_n = n;
        return 0;
}

int jupyter_json_part(const void *data, size_t len, json_object **ret, const char **ret_error) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        enum json_tokener_error err;
        const char *why;
        int r;

        r = json_text_check_strict(data, len, &why);
        if (r < 0) {
                *ret_error = why;
                return r;
        }
        r = json_parse_strict(data, len, JUPYTER_JSON_MAX_DEPTH, &o, &err);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                *ret_error = err == json_tokener_error_parse_utf8_string ? "a part is not valid UTF-8" :
                             err == json_tokener_error_depth ? "a part is nested too deeply" :
                             "a part is not JSON";
                return -EBADMSG;
        }
        if (!json_object_is_type(o, json_type_object)) {
                *ret_error = "a part is not a JSON object";
                return -EBADMSG;
        }
        *ret = STEAL(o);
        return 0;
}

int jupyter_msg_check_header(const JupyterMsg *m, const char **ret_error) {
        if (!jupyter_msg_id(m) || !jupyter_msg_type(m)) {
                *ret_error = "the header needs string msg_id and msg_type";
                return -EBADMSG;
        }
        return 0;
}

int jupyter_msg_from_parts(JupyterChannel channel, const struct iovec *parts, size_t n_parts,
                           JupyterMsg **ret, const char **ret_error) {
        _cleanup_jupyter_msg_ JupyterMsg *m = NULL;
        json_object **slots[4];
        int r;

        if (n_parts < 4) {
                *ret_error = "a message needs header, parent_header, metadata and content";
                return -EBADMSG;
        }
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->channel = channel;
        slots[0] = &m->header;
        slots[1] = &m->parent_header;
        slots[2] = &m->metadata;
        slots[3] = &m->content;
        for (size_t i = 0; i < 4; i++) {
                r = jupyter_json_part(parts[i].iov_base, parts[i].iov_len, slots[i], ret_error);
                if (r < 0)
                        return r;
        }
        r = jupyter_msg_check_header(m, ret_error);
        if (r < 0)
                return r;
        if (n_parts > 4) {
                m->buffers = calloc(n_parts - 4, sizeof(struct iovec));
                if (!m->buffers)
                        return -ENOMEM;
                for (size_t i = 4; i < n_parts; i++) {
                        r = iov_dup(&m->buffers[i - 4], parts[i].iov_base, parts[i].iov_len);
                        if (r < 0)
                                return r;
                        m->n_buffers++;
                }
        }
        *ret = STEAL(m);
        return 0;
}

/* The history: a ring of raw digests, and a table over them for the lookup. */
typedef struct DigestEntry {
        HashLink link;
        uint8_t digest[SHA256_DIGEST_SIZE];
        bool used;
} DigestEntry;

struct JupyterDigestHistory {
        HashMap map;
        DigestEntry ring[JUPYTER_DIGEST_HISTORY_MAX];
        size_t next;
};

int jupyter_digest_history_new(JupyterDigestHistory **ret) {
        JupyterDigestHistory *h = calloc(1, sizeof(*h));
        int r;

        if (!h)
                return -ENOMEM;
        r = hashmap_init(&h->map, 1024, 8192);
        if (r < 0) {
                free(h);
                return r;
        }
        *ret = h;
        return 0;
}

JupyterDigestHistory *jupyter_digest_history_free(JupyterDigestHistory *h) {
        if (!h)
                return NULL;
        hashmap_done(&h->map);
        return mfree(h);
}

static uint64_t digest_hash(const uint8_t *d) {
        /* An HMAC output the sender cannot choose without the key: its first bytes are the hash. */
        uint64_t v;

        memcpy(&v, d, sizeof(v));
        return v;
}

/* 0 if new (now remembered), -EEXIST if seen. */
static int digest_history_add(JupyterDigestHistory *h, const uint8_t digest[static SHA256_DIGEST_SIZE]) {
        uint64_t hash = digest_hash(digest);
        DigestEntry *e;

        HASHMAP_FOREACH_HASH(l, &h->map, hash)
                if (memcmp(hashmap_entry(l, DigestEntry, link)->digest, digest, SHA256_DIGEST_SIZE) == 0)
                        return -EEXIST;
        e = &h->ring[h->next];
        if (e->used)
                hashmap_remove(&h->map, &e->link);
        memcpy(e->digest, digest, SHA256_DIGEST_SIZE);
        e->used = true;
        h->next = (h->next + 1) % JUPYTER_DIGEST_HISTORY_MAX;
        return hashmap_add(&h->map, &e->link, hash);
}

static int hex_digit(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

static int verify_signature(const struct iovec *sig, const struct iovec parts[4], const uint8_t *key,
                            size_t key_len, JupyterDigestHistory *history, const char **ret_error) {
        char expected[SIG_HEX_LEN + 1];
        uint8_t raw[SHA256_DIGEST_SIZE];

        if (key_len == 0)
                return 0;
        sign_parts(key, key_len, parts, expected);
        /* The length is public (always 64); the bytes are compared in constant time. */
        if (sig->iov_len != SIG_HEX_LEN || !memeql_sec(sig->iov_base, expected, SIG_HEX_LEN)) {
                *ret_error = "invalid signature";
                return -EBADMSG;
        }
        if (!history)
                return 0;
        for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++)
                raw[i] = (uint8_t) (hex_digit(expected[2 * i]) << 4 | hex_digit(expected[2 * i + 1]));
        if (digest_history_add(history, raw) == -EEXIST) {
                *ret_error = "duplicate signature";
                return -EBADMSG;
        }
        return 0;
}

int jupyter_msg_from_wire_dedup(JupyterChannel channel, const struct iovec *frames, size_t n,
                                const uint8_t *key, size_t key_len, JupyterDigestHistory *history,
                                JupyterMsg **ret, const char **ret_error) {
        size_t d;
        int r;

        if (channel < 0 || channel >= _JUPYTER_CHANNEL_MAX)
                return -EINVAL;
        for (d = 0; d < n; d++)
                if (frames[d].iov_len == strlen(DELIM) && memcmp(frames[d].iov_base, DELIM, strlen(DELIM)) == 0)
                        break;
        if (d >= n) {
                *ret_error = "no <IDS|MSG> delimiter";
                return -EBADMSG;
        }
        if (n - d < 6) {
                *ret_error = "a message needs a signature and four parts after the delimiter";
                return -EBADMSG;
        }
        r = verify_signature(&frames[d + 1], &frames[d + 2], key, key_len, history, ret_error);
        if (r < 0)
                return r;
        return jupyter_msg_from_parts(channel, frames + d + 2, n - d - 2, ret, ret_error);
}

int jupyter_msg_from_wire(JupyterChannel channel, const struct iovec *frames, size_t n,
                          const uint8_t *key, size_t key_len, JupyterMsg **ret, const char **ret_error) {
        return jupyter_msg_from_wire_dedup(channel, frames, n, key, key_len, NULL, ret, ret_error);
}
