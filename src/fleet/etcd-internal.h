/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What etcd.c and etcd-json.c share: the calls' kinds, their request bodies and answers (no I/O). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fleet/etcd.h"
#include "fleet/fleet-fail.h"

typedef enum EtcdOp {
        ETCD_OP_LEASE_GRANT,
        ETCD_OP_LEASE_KEEPALIVE,
        ETCD_OP_LEASE_REVOKE,
        ETCD_OP_PUT,
        ETCD_OP_GET,
        ETCD_OP_RANGE,
        ETCD_OP_DELETE,
        ETCD_OP_CREATE,                 /* etcd_create_if_absent() */
        ETCD_OP_COMPARE_AND_PUT,
        _ETCD_OP_MAX,
        _ETCD_OP_INVALID = -EINVAL,
} EtcdOp;

/* etcd_op_path() - the gateway's path of @op, "/v3/kv/put" … */
const char *etcd_op_path(EtcdOp op);
/* etcd_op_name() - "put", "lease grant" …, for messages. */
const char *etcd_op_name(EtcdOp op);

/* The arguments of one call; the keys are whole (the client's prefix in front) and may hold any byte. */
typedef struct EtcdRequest {
        const char *key;
        size_t key_size;
        const char *range_end;          /* ETCD_OP_RANGE only */
        size_t range_end_size;
        const char *value;              /* NUL-terminated */
        int64_t lease_id;               /* put, create, compare_and_put: 0 for none; keepalive, revoke */
        int64_t ttl;                    /* lease grant */
        int64_t mod_revision;           /* compare_and_put */
} EtcdRequest;

/* etcd_request_body() - the JSON text of @op with @req into *@ret (malloc'ed). Return: 0 or -ENOMEM. */
int etcd_request_body(EtcdOp op, const EtcdRequest *req, char **ret);

/* etcd_prefix_range_end() - the end of the range of every key that starts with the @size bytes
 * at @prefix, as etcd's clientv3.GetPrefixRangeEnd: the last byte below 0xff incremented, what
 * follows it dropped; "\0" (all keys) if there is none. Return: 0 or -ENOMEM. */
int etcd_prefix_range_end(const char *prefix, size_t size, char **ret, size_t *ret_size);

/* An answer parsed: the result handed to the callback and what it points to. */
typedef struct EtcdAnswer {
        EtcdResult result;
        char *message;                  /* result.message points here */
} EtcdAnswer;

/*
 * etcd_answer_parse() - the gateway's answer to @op (HTTP @http_status, the @size bytes of
 * @body, NUL-terminated) into @a, keys stripped of the client's @prefix. Return: 0 or -errno,
 * with a->message saying why: -EPROTO (not JSON, a field missing or of the wrong type, a key
 * outside the prefix), -ENOENT (get: no key; keepalive: lease expired), -EAGAIN (503, etcd
 * unavailable: another member may answer), etcd's error codes (etcd_errno_from_grpc()) or by HTTP
 * status, -ENOMEM. The caller calls etcd_answer_done() in every case.
 */
int etcd_answer_parse(EtcdOp op, const char *prefix, long http_status, const char *body, size_t size,
                      EtcdAnswer *a);
void etcd_answer_done(EtcdAnswer *a);
/* etcd_answer_fail(EtcdAnswer *a, int error, const char *format, ...) - sets a->message (and
 * result.message) from @format: fleet_fail(). Return: @error, or -ENOMEM. */
#define etcd_answer_fail(a, error, ...) fleet_fail(&(a)->message, &(a)->result.message, (error), __VA_ARGS__)

/* etcd_errno_from_grpc() - a gRPC status code of etcd's errors as -errno (-EIO for unknown ones). */
int etcd_errno_from_grpc(int64_t code);
