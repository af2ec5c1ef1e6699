/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* etcd's JSON gateway on the wire (etcd-internal.h): request bodies, answers, errors. Pure. */

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <nettle/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/etcd-internal.h"
#include "util/json-util.h"
#include "util/macro.h"

SR_DEFINE_FREE_FUNC(struct json_tokener *, json_tokener_free);

static const struct {
        const char *path;
        const char *name;
} etcd_ops[_ETCD_OP_MAX] = {
        [ETCD_OP_LEASE_GRANT]     = { "/v3/lease/grant",     "lease grant" },
        [ETCD_OP_LEASE_KEEPALIVE] = { "/v3/lease/keepalive", "lease keepalive" },
        [ETCD_OP_LEASE_REVOKE]    = { "/v3/lease/revoke",    "lease revoke" },
        [ETCD_OP_PUT]             = { "/v3/kv/put",          "put" },
        [ETCD_OP_GET]             = { "/v3/kv/range",        "get" },
        [ETCD_OP_RANGE]           = { "/v3/kv/range",        "range" },
        [ETCD_OP_DELETE]          = { "/v3/kv/deleterange",  "delete" },
        [ETCD_OP_CREATE]          = { "/v3/kv/txn",          "create-if-absent" },
        [ETCD_OP_COMPARE_AND_PUT] = { "/v3/kv/txn",          "compare-and-put" },
};

const char *etcd_op_path(EtcdOp op) {
        return op >= 0 && op < _ETCD_OP_MAX ? etcd_ops[op].path : NULL;
}

const char *etcd_op_name(EtcdOp op) {
        return op >= 0 && op < _ETCD_OP_MAX ? etcd_ops[op].name : NULL;
}

/* ---- requests ---- */

static json_object *json_base64_new(const void *data, size_t size) {
        _cleanup_free_ char *text = NULL;

        if (size > (SIZE_MAX - 1) / 4 * 3 - 3)
                return NULL;
        text = malloc(BASE64_ENCODE_RAW_LENGTH(size) + 1);
        if (!text)
                return NULL;
        base64_encode_raw(text, size, data);
        text[BASE64_ENCODE_RAW_LENGTH(size)] = '\0';
        return json_object_new_string_len(text, (int) BASE64_ENCODE_RAW_LENGTH(size));
}

/* The gateway reads int64s from strings (its own answers write them so). */
static json_object *json_int64_string_new(int64_t v) {
        char buf[32];

        (void) snprintf(buf, sizeof(buf), "%" PRIi64, v);
        return json_object_new_string(buf);
}

/* A RangeRequest, PutRequest or DeleteRangeRequest's fields, or a txn's compare on the key. */
static json_object *request_key_new(const EtcdRequest *req, EtcdOp op) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o || json_add(o, "key", json_base64_new(req->key, req->key_size)) < 0)
                return NULL;
        if (op == ETCD_OP_RANGE && json_add(o, "range_end", json_base64_new(req->range_end, req->range_end_size)) < 0)
                return NULL;
        if (op == ETCD_OP_PUT || op == ETCD_OP_CREATE || op == ETCD_OP_COMPARE_AND_PUT) {
                if (json_add(o, "value", json_base64_new(req->value, strlen(req->value))) < 0)
                        return NULL;
                if (req->lease_id != 0 && json_add(o, "lease", json_int64_string_new(req->lease_id)) < 0)
                        return NULL;
        }
        return STEAL(o);
}

/* {"compare":[…],"success":[{"request_put":…}],"failure":[{"request_range":…}]} */
static json_object *request_txn_new(const EtcdRequest *req, EtcdOp op) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *cmp = json_object_new_object(),
                                                *put = json_object_new_object(), *range = json_object_new_object();
        json_object *a;

        if (!o || !cmp || !put || !range)
                return NULL;
        if (json_add(cmp, "key", json_base64_new(req->key, req->key_size)) < 0 ||
            json_add(cmp, "result", json_object_new_string("EQUAL")) < 0)
                return NULL;
        /* the gateway omits zero fields in answers, but reads "0" fine in a request */
        if (op == ETCD_OP_CREATE) {
                if (json_add(cmp, "target", json_object_new_string("CREATE")) < 0 ||
                    json_add(cmp, "create_revision", json_int64_string_new(0)) < 0)
                        return NULL;
        } else if (json_add(cmp, "target", json_object_new_string("MOD")) < 0 ||
                   json_add(cmp, "mod_revision", json_int64_string_new(req->mod_revision)) < 0)
                return NULL;
        if (json_add(put, "request_put", request_key_new(req, op)) < 0 ||
            json_add(range, "request_range", request_key_new(req, ETCD_OP_GET)) < 0)
                return NULL;

        a = json_object_new_array();
        if (json_add(o, "compare", a) < 0 || json_array_add(a, STEAL(cmp)) < 0)
                return NULL;
        a = json_object_new_array();
        if (json_add(o, "success", a) < 0 || json_array_add(a, STEAL(put)) < 0)
                return NULL;
        a = json_object_new_array();
        if (json_add(o, "failure", a) < 0 || json_array_add(a, STEAL(range)) < 0)
                return NULL;
        return STEAL(o);
}

int etcd_request_body(EtcdOp op, const EtcdRequest *req, char **ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *text;
        char *s;

        assert(req);
        assert(ret);

        switch (op) {
        case ETCD_OP_LEASE_GRANT:
                o = json_object_new_object();
                if (!o || json_add(o, "TTL", json_int64_string_new(req->ttl)) < 0)
                        return -ENOMEM;
                break;
        case ETCD_OP_LEASE_KEEPALIVE:
        case ETCD_OP_LEASE_REVOKE:
                o = json_object_new_object();
                if (!o || json_add(o, "ID", json_int64_string_new(req->lease_id)) < 0)
                        return -ENOMEM;
                break;
        case ETCD_OP_PUT:
        case ETCD_OP_GET:
        case ETCD_OP_RANGE:
        case ETCD_OP_DELETE:
                o = request_key_new(req, op);
                break;
        case ETCD_OP_CREATE:
        case ETCD_OP_COMPARE_AND_PUT:
                o = request_txn_new(req, op);
                break;
        case _ETCD_OP_MAX:
        case _ETCD_OP_INVALID:
        default:
                return -EINVAL;
        }
        if (!o)
                return -ENOMEM;

        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                return -ENOMEM;
        s = strdup(text);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int etcd_prefix_range_end(const char *prefix, size_t size, char **ret, size_t *ret_size) {
        char *end;

        assert(prefix || size == 0);
        assert(ret);
        assert(ret_size);

        for (size_t i = size; i > 0; i--)
                if ((unsigned char) prefix[i - 1] < 0xff) {
                        end = malloc(i);
                        if (!end)
                                return -ENOMEM;
                        memcpy(end, prefix, i);
                        end[i - 1] = (char) ((unsigned char) end[i - 1] + 1);
                        *ret = end;
                        *ret_size = i;
                        return 0;
                }

        end = calloc(1, 1);
        if (!end)
                return -ENOMEM;
        *ret = end;
        *ret_size = 1;
        return 0;
}

/* ---- answers ---- */

int etcd_errno_from_grpc(int64_t code) {
        static const int errors[] = {
                [1] = ECANCELED,        /* CANCELLED */
                [2] = EIO,              /* UNKNOWN */
                [3] = EINVAL,           /* INVALID_ARGUMENT */
                [4] = ETIMEDOUT,        /* DEADLINE_EXCEEDED */
                [5] = ENOENT,           /* NOT_FOUND: "requested lease not found" */
                [6] = EEXIST,           /* ALREADY_EXISTS */
                [7] = EACCES,           /* PERMISSION_DENIED */
                [8] = ENOSPC,           /* RESOURCE_EXHAUSTED: "database space exceeded" */
                [9] = EINVAL,           /* FAILED_PRECONDITION */
                [10] = ECANCELED,       /* ABORTED */
                [11] = ERANGE,          /* OUT_OF_RANGE: a compacted revision */
                [12] = EOPNOTSUPP,      /* UNIMPLEMENTED */
                [13] = EIO,             /* INTERNAL */
                [14] = EAGAIN,          /* UNAVAILABLE: no leader, request timed out */
                [15] = EIO,             /* DATA_LOSS */
                [16] = EACCES,          /* UNAUTHENTICATED */
        };

        if (code <= 0 || (uint64_t) code >= ELEMENTSOF(errors))
                return -EIO;
        return -errors[code];
}

static int errno_from_http(long status) {
        if (status == 503)
                return -EAGAIN;
        if (status == 401 || status == 403)
                return -EACCES;
        if (status == 408 || status == 504)
                return -ETIMEDOUT;
        if (status == 413)
                return -E2BIG;
        if (status == 429)
                return -EBUSY;
        if (status == 400)
                return -EINVAL;
        if (status >= 500)
                return -EIO;
        return -EPROTO;                 /* 404, 405 …: not an etcd v3 gateway at this URL */
}

/* An int64 field: a JSON string of digits (the gateway's form) or a number; absent means 0. */
static int json_get_int64(json_object *o, const char *key, int64_t *ret) {
        json_object *v;
        const char *s;
        char *end;
        long long n;

        *ret = 0;
        if (!o || !json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (json_object_is_type(v, json_type_int)) {
                *ret = json_object_get_int64(v);
                return 0;
        }
        if (!json_object_is_type(v, json_type_string))
                return -EPROTO;
        s = json_object_get_string(v);
        if (!s || !(isdigit((unsigned char) s[0]) || (s[0] == '-' && isdigit((unsigned char) s[1]))))
                return -EPROTO;
        errno = 0;
        n = strtoll(s, &end, 10);
        if (errno != 0 || *end != '\0')
                return -EPROTO;
        *ret = n;
        return 0;
}

static int base64_decode_alloc(const char *s, size_t n, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        struct base64_decode_ctx ctx;
        size_t size;

        buf = malloc(BASE64_DECODE_LENGTH(n) + 1);
        if (!buf)
                return -ENOMEM;
        base64_decode_init(&ctx);
        if (!base64_decode_update(&ctx, &size, (uint8_t *) buf, n, s) || !base64_decode_final(&ctx))
                return -EPROTO;
        buf[size] = '\0';
        *ret = STEAL(buf);
        *ret_size = size;
        return 0;
}

static int parse_kv(json_object *o, const char *prefix, EtcdKeyValue *kv) {
        _cleanup_free_ char *key = NULL;
        const char *s;
        size_t size, plen = strlen(prefix);
        int r;

        if (!json_object_is_type(o, json_type_object))
                return -EPROTO;
        s = json_get_string(o, "key");
        if (!s)
                return -EPROTO;
        r = base64_decode_alloc(s, strlen(s), &key, &size);
        if (r < 0)
                return r;
        if (size < plen || memcmp(key, prefix, plen) != 0 || memchr(key, '\0', size))
                return -EPROTO;         /* outside our prefix, or not a C string */
        kv->key = strdup(key + plen);
        if (!kv->key)
                return -ENOMEM;

        s = json_get_string(o, "value") ?: "";  /* absent: empty */
        r = base64_decode_alloc(s, strlen(s), &kv->value, &kv->value_size);
        if (r < 0)
                return r;

        if (json_get_int64(o, "create_revision", &kv->create_revision) < 0 ||
            json_get_int64(o, "mod_revision", &kv->mod_revision) < 0 ||
            json_get_int64(o, "version", &kv->version) < 0 ||
            json_get_int64(o, "lease", &kv->lease) < 0)
                return -EPROTO;
        return 0;
}

/* The "kvs" array of a RangeResponse (absent: none). */
static int parse_kvs(EtcdAnswer *a, json_object *o, const char *prefix) {
        json_object *kvs;
        size_t n;
        int r;

        if (!json_object_object_get_ex(o, "kvs", &kvs) || json_object_is_type(kvs, json_type_null))
                return 0;
        if (!json_object_is_type(kvs, json_type_array))
                return etcd_answer_fail(a, -EPROTO, "\"kvs\" is not an array.");
        n = json_object_array_length(kvs);
        if (n == 0)
                return 0;
        a->result.kvs = calloc(n, sizeof(EtcdKeyValue));
        if (!a->result.kvs)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r = parse_kv(json_object_array_get_idx(kvs, i), prefix, &a->result.kvs[i]);
                a->result.n_kvs = i + 1;        /* freed by etcd_answer_done(), even half-filled */
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return etcd_answer_fail(a, r, "Malformed key-value %zu in the answer.", i);
        }
        return 0;
}

/* A TxnResponse: succeeded, and on failure the failure branch's one RangeResponse. */
static int parse_txn(EtcdAnswer *a, json_object *o, const char *prefix) {
        json_object *v, *responses, *first, *range;

        if (json_object_object_get_ex(o, "succeeded", &v)) {
                if (!json_object_is_type(v, json_type_boolean))
                        return etcd_answer_fail(a, -EPROTO, "\"succeeded\" is not a boolean.");
                a->result.succeeded = json_object_get_boolean(v);
        }
        if (a->result.succeeded)
                return 0;

        if (!json_object_object_get_ex(o, "responses", &responses) ||
            !json_object_is_type(responses, json_type_array) || json_object_array_length(responses) != 1)
                return etcd_answer_fail(a, -EPROTO, "A refused transaction without its one range answer.");
        first = json_object_array_get_idx(responses, 0);
        if (!json_object_object_get_ex(first, "response_range", &range) ||
            !json_object_is_type(range, json_type_object))
                return etcd_answer_fail(a, -EPROTO, "A refused transaction without its range answer.");
        return parse_kvs(a, range, prefix);
}

/* The first line of a LeaseKeepAlive stream: {"result":{…}} or {"error":{…}}. */
static int parse_keepalive(EtcdAnswer *a, json_object *o) {
        json_object *v;
        int64_t code;

        if (json_object_object_get_ex(o, "error", &v) && json_object_is_type(v, json_type_object)) {
                if (json_get_int64(v, "grpc_code", &code) < 0)
                        code = 2;
                return etcd_answer_fail(a, etcd_errno_from_grpc(code), "etcd: %s",
                                   json_get_string(v, "message") ?: "lease keepalive failed");
        }
        if (!json_object_object_get_ex(o, "result", &v) || !json_object_is_type(v, json_type_object))
                return etcd_answer_fail(a, -EPROTO, "A keepalive answer without \"result\".");
        if (json_get_int64(v, "ID", &a->result.lease_id) < 0 || json_get_int64(v, "TTL", &a->result.ttl) < 0)
                return etcd_answer_fail(a, -EPROTO, "Malformed keepalive answer.");
        if (a->result.ttl <= 0)
                return etcd_answer_fail(a, -ENOENT, "Lease %" PRIi64 " expired.", a->result.lease_id);
        return 0;
}

/* An error answer, {"error":"…","message":"…","code":N}, else what the HTTP status says. */
static int parse_error(EtcdAnswer *a, long status, json_object *o) {
        const char *message = json_get_string(o, "message") ?: json_get_string(o, "error");
        int64_t code = 0;

        if (o && message && json_get_int64(o, "code", &code) >= 0 && code > 0)
                return etcd_answer_fail(a, etcd_errno_from_grpc(code), "etcd: %s (HTTP %ld)", message, status);
        return etcd_answer_fail(a, errno_from_http(status), "HTTP %ld from etcd%s%s", status,
                           message ? ": " : "", message ?: "");
}

static int parse_body(EtcdOp op, const char *body, size_t size, json_object **ret) {
        _cleanup_(json_tokener_freep) struct json_tokener *tok = NULL;
        json_object *o;

        if (size > INT_MAX)
                return -E2BIG;
        tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        o = json_tokener_parse_ex(tok, body, (int) size);
        if (!o || !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return -EPROTO;
        }
        /* a keepalive streams one document a line; any other answer is one document */
        if (op != ETCD_OP_LEASE_KEEPALIVE)
                for (size_t i = json_tokener_get_parse_end(tok); i < size; i++)
                        if (!isspace((unsigned char) body[i])) {
                                json_object_put(o);
                                return -EPROTO;
                        }
        *ret = o;
        return 0;
}

static int parse_result(EtcdOp op, const char *prefix, json_object *o, EtcdAnswer *a) {
        const char *s;
        int r;

        switch (op) {
        case ETCD_OP_LEASE_GRANT:
                s = json_get_string(o, "error");
                if (!isempty(s))
                        return etcd_answer_fail(a, -EIO, "etcd: %s", s);
                if (json_get_int64(o, "ID", &a->result.lease_id) < 0 || json_get_int64(o, "TTL", &a->result.ttl) < 0)
                        return etcd_answer_fail(a, -EPROTO, "Malformed lease grant answer.");
                if (a->result.lease_id == 0 || a->result.ttl <= 0)
                        return etcd_answer_fail(a, -EPROTO, "A lease grant answer without a lease.");
                return 0;
        case ETCD_OP_LEASE_KEEPALIVE:
                return parse_keepalive(a, o);
        case ETCD_OP_LEASE_REVOKE:
        case ETCD_OP_PUT:
                return 0;
        case ETCD_OP_GET:
        case ETCD_OP_RANGE:
                r = parse_kvs(a, o, prefix);
                if (r < 0)
                        return r;
                if (op == ETCD_OP_GET && a->result.n_kvs == 0)
                        return etcd_answer_fail(a, -ENOENT, "No such key.");
                return 0;
        case ETCD_OP_DELETE:
                if (json_get_int64(o, "deleted", &a->result.deleted) < 0)
                        return etcd_answer_fail(a, -EPROTO, "Malformed \"deleted\".");
                return 0;
        case ETCD_OP_CREATE:
        case ETCD_OP_COMPARE_AND_PUT:
                return parse_txn(a, o, prefix);
        case _ETCD_OP_MAX:
        case _ETCD_OP_INVALID:
        default:
                return -EINVAL;
        }
}

int etcd_answer_parse(EtcdOp op, const char *prefix, long http_status, const char *body, size_t size,
                      EtcdAnswer *a) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *header;
        int r;

        assert(body);
        assert(a);

        *a = (EtcdAnswer) {};
        r = parse_body(op, body, size, &o);
        if (r == -ENOMEM)
                return r;
        if (http_status != 200)
                return parse_error(a, http_status, o);
        if (r < 0)
                return etcd_answer_fail(a, r, "Malformed JSON in etcd's answer (%zu bytes).", size);

        if (json_object_object_get_ex(o, "header", &header) &&
            json_get_int64(header, "revision", &a->result.revision) < 0)
                return etcd_answer_fail(a, -EPROTO, "Malformed header revision.");

        return parse_result(op, prefix ?: "", o, a);
}

void etcd_answer_done(EtcdAnswer *a) {
        if (!a)
                return;
        for (size_t i = 0; i < a->result.n_kvs; i++) {
                free(a->result.kvs[i].key);
                free(a->result.kvs[i].value);
        }
        free(a->result.kvs);
        free(a->message);
        *a = (EtcdAnswer) {};
}
