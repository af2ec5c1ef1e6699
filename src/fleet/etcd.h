/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An asynchronous etcd v3 client over etcd's JSON gateway (HTTP/1.1, /v3/...), in an sd-event loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

typedef struct EtcdClient EtcdClient;
typedef struct EtcdCall EtcdCall;

/* Bounds used when the configuration leaves them 0. */
#define ETCD_TIMEOUT_USEC_DEFAULT (5 * USEC_PER_SEC)
#define ETCD_CONNECT_TIMEOUT_USEC_DEFAULT (1 * USEC_PER_SEC)
#define ETCD_RESPONSE_SIZE_MAX_DEFAULT ((size_t) 16 * 1024 * 1024)

typedef struct EtcdClientConfig {
        /* The members' client URLs, "http://127.0.0.1:2379" or "https://…", NULL-terminated, at
         * least one. A call goes to the member that answered last and, when that one cannot be
         * reached (connection refused, unreachable, connect timeout, 503/Unavailable), to the next. */
        char *const *endpoints;
        const char *prefix;             /* prepended to every key; NULL or "" for none */
        const char *ca_file;            /* TLS: the CA bundle to verify the members with; NULL: the system's */
        const char *cert_file;          /* TLS client certificate (PEM) and its key, or NULL */
        const char *key_file;
        uint64_t timeout_usec;          /* one call, all its endpoints together */
        uint64_t connect_timeout_usec;  /* one endpoint's connect, bounded by what is left of the call */
        size_t max_response_size;       /* an answer's body */
} EtcdClientConfig;

/* One key as etcd stores it. */
typedef struct EtcdKeyValue {
        char *key;                      /* without the client's prefix */
        char *value;                    /* value_size bytes, NUL-terminated after them */
        size_t value_size;
        int64_t create_revision;
        int64_t mod_revision;
        int64_t version;
        int64_t lease;                  /* 0: none */
} EtcdKeyValue;

/* What a call answers; valid during the callback only. Fields a call does not fill are 0/NULL. */
typedef struct EtcdResult {
        const char *message;            /* on error: what failed (etcd's, libcurl's or ours) */
        const char *endpoint;           /* the member that answered, or the last one tried */
        int64_t revision;               /* the store's revision in the answer's header; after a
                                         * successful put/create/compare_and_put: the key's new
                                         * mod_revision (the fencing token) */
        int64_t lease_id;               /* lease_grant, lease_keepalive */
        int64_t ttl;                    /* lease_grant: granted; lease_keepalive: remaining, seconds */
        bool succeeded;                 /* create_if_absent, compare_and_put */
        int64_t deleted;                /* delete: how many keys went */
        EtcdKeyValue *kvs;              /* get: the key; range_prefix: all, sorted by key;
                                         * create_if_absent/compare_and_put refused: the key as it
                                         * is (none for compare_and_put on an absent key) */
        size_t n_kvs;
} EtcdResult;

/*
 * EtcdCallback - the end of a call: @error 0 or -errno, @result never NULL (its message says why
 * on error). Runs from the event loop, never from inside the function that started the call;
 * the call's handle is gone when it runs. It may start, cancel calls and free other objects, but
 * must not free the EtcdClient.
 *
 * Errors of every call: -ECONNREFUSED, -EHOSTUNREACH, -ENETUNREACH (no endpoint could be reached:
 * the last one's), -ETIMEDOUT (the call's timeout), -ECONNRESET (a member closed without an
 * answer), -EPROTO (an answer that is not HTTP, not JSON, or JSON without what the call needs),
 * -E2BIG (an answer over max_response_size), -EACCES (TLS refused, etcd's permission denied or
 * unauthenticated), -EAGAIN (etcd unavailable, e.g. no leader, on every endpoint), -ENOSPC
 * (etcd's quota), -EINVAL (etcd refused the request), -ENOMEM, -EIO.
 */
typedef void (*EtcdCallback)(int error, const EtcdResult *result, void *userdata);

/*
 * etcd_client_new() - a client on @event (referenced); copies @config. Nothing is sent yet.
 * Return: 0, -EINVAL (no endpoint, or one that is not http:// or https://), -ENOENT/-EACCES (a
 * TLS file that cannot be read), -ENOMEM or -EIO.
 */
int etcd_client_new(sd_event *event, const EtcdClientConfig *config, EtcdClient **ret);
/* etcd_client_free() - cancels the calls in flight (no callback runs). Accepts NULL. Return: NULL. */
EtcdClient *etcd_client_free(EtcdClient *c);
SR_DEFINE_FREE_FUNC(EtcdClient *, etcd_client_free);

/*
 * The calls. Each returns 0 when the call started (its callback will run exactly once unless it
 * is cancelled) or -EINVAL (an empty key, a negative TTL, lease or revision) or -ENOMEM, in which
 * case no callback runs. @ret_call may be NULL; otherwise it receives a handle for
 * etcd_call_cancel(), valid until the callback runs. Keys are NUL-terminated strings, the
 * client's prefix goes in front of them; values are NUL-terminated strings.
 */

/* etcd_lease_grant() - a lease of @ttl_sec seconds (etcd may raise it to its minimum): lease_id, ttl. */
int etcd_lease_grant(EtcdClient *c, int64_t ttl_sec, EtcdCallback callback, void *userdata, EtcdCall **ret_call);
/* etcd_lease_keepalive() - renews @lease_id once: ttl (remaining). -ENOENT: the lease expired or never was. */
int etcd_lease_keepalive(EtcdClient *c, int64_t lease_id, EtcdCallback callback, void *userdata,
                         EtcdCall **ret_call);
/* etcd_lease_revoke() - ends @lease_id and deletes its keys. -ENOENT: no such lease. */
int etcd_lease_revoke(EtcdClient *c, int64_t lease_id, EtcdCallback callback, void *userdata, EtcdCall **ret_call);

/* etcd_put() - sets @key to @value, attached to @lease_id (0: none): revision. -ENOENT: no such lease. */
int etcd_put(EtcdClient *c, const char *key, const char *value, int64_t lease_id, EtcdCallback callback,
             void *userdata, EtcdCall **ret_call);
/* etcd_get() - @key: kvs[0] (value, create and mod revisions, lease). -ENOENT: absent. */
int etcd_get(EtcdClient *c, const char *key, EtcdCallback callback, void *userdata, EtcdCall **ret_call);
/* etcd_range_prefix() - every key that starts with @prefix ("" for all of the client's): kvs. */
int etcd_range_prefix(EtcdClient *c, const char *prefix, EtcdCallback callback, void *userdata,
                      EtcdCall **ret_call);
/* etcd_delete() - deletes @key: deleted (0 when it was absent, which is no error). */
int etcd_delete(EtcdClient *c, const char *key, EtcdCallback callback, void *userdata, EtcdCall **ret_call);

/*
 * etcd_create_if_absent() - one transaction: if @key does not exist (create_revision == 0), put
 * @value under @lease_id (0: none): succeeded, revision; else succeeded false and kvs[0], the
 * current holder's value and revisions. -ENOENT: no such lease. A call moved on to another member
 * after a 503 (etcd's "request timed out" may come after the write was applied) can find the
 * caller's own value as the holder: compare the value or the lease to tell.
 */
int etcd_create_if_absent(EtcdClient *c, const char *key, const char *value, int64_t lease_id,
                          EtcdCallback callback, void *userdata, EtcdCall **ret_call);
/*
 * etcd_compare_and_put() - the fencing primitive: put @value under @lease_id only if @key's
 * mod_revision is still @expected_mod_revision: succeeded, revision (the new mod_revision);
 * else succeeded false and kvs (the key as it is, if it exists).
 */
int etcd_compare_and_put(EtcdClient *c, const char *key, const char *value, int64_t expected_mod_revision,
                         int64_t lease_id, EtcdCallback callback, void *userdata, EtcdCall **ret_call);

/*
 * etcd_call_cancel() - stops a call; its callback does not run. What etcd already applied stays
 * applied. Accepts NULL. Return: NULL.
 */
EtcdCall *etcd_call_cancel(EtcdCall *call);
