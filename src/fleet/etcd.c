/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The etcd client (etcd.h): its calls, each one HTTP request at a time, moving on to the next member. */

#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleet/curl-glue.h"
#include "fleet/etcd-internal.h"
#include "fleet/etcd.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strv.h"
#include "util/time-util.h"

#define USEC_TO_MSEC_UP(u) (((u) + USEC_PER_MSEC - 1) / USEC_PER_MSEC)

struct EtcdClient {
        sd_event *event;
        CurlGlue *glue;
        char **endpoints;               /* without a trailing '/' */
        size_t n_endpoints;
        size_t current;                 /* the one that answered last */
        char *prefix;
        char *ca_file, *cert_file, *key_file;
        uint64_t timeout_usec, connect_timeout_usec;
        size_t max_response_size;
        struct curl_slist *headers;
        EtcdCall *calls;
};

struct EtcdCall {
        EtcdClient *client;
        EtcdOp op;
        char *body;
        uint64_t deadline;              /* CLOCK_MONOTONIC */
        size_t endpoint;                /* the one being tried */
        size_t tried;                   /* endpoints tried so far */
        CurlGlueRequest *request;
        EtcdCallback callback;
        void *userdata;
        EtcdCall *prev, *next;
};

static EtcdCall *call_free(EtcdCall *call) {
        EtcdClient *c;

        if (!call)
                return NULL;
        c = call->client;
        if (call->next)
                call->next->prev = call->prev;
        if (call->prev)
                call->prev->next = call->next;
        else if (c && c->calls == call)
                c->calls = call->next;
        (void) curl_glue_request_free(call->request);
        free(call->body);
        free(call);
        return NULL;
}
SR_DEFINE_FREE_FUNC(EtcdCall *, call_free);

EtcdCall *etcd_call_cancel(EtcdCall *call) {
        return call_free(call);
}

/* Ends @call: the callback runs after the call is gone, with what @a holds. */
static void call_finish(EtcdCall *call, int error, EtcdAnswer *a) {
        EtcdClient *c = call->client;
        EtcdCallback callback = call->callback;
        void *userdata = call->userdata;
        const char *endpoint = c->endpoints[call->endpoint];

        if (error < 0 && !a->result.message)
                a->result.message = strerror(-error);
        a->result.endpoint = endpoint;
        log_debug_errno(error, "etcd %s via %s: %s", etcd_op_name(call->op), endpoint,
                        error < 0 ? a->result.message : "done");
        (void) call_free(call);
        callback(error, &a->result, userdata);
}

/* A failure that left etcd untouched: another member may answer. */
static bool error_is_unreached(int error, CURL *easy) {
        static const int unreached[] = { ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, ENETDOWN, EADDRNOTAVAIL };
        curl_off_t connect_usec = 0;

        for (size_t i = 0; i < ELEMENTSOF(unreached); i++)
                if (error == -unreached[i])
                        return true;
        if (error != -ETIMEDOUT || !easy)
                return false;
        /* a connect that timed out (not an answer that did) */
        return curl_easy_getinfo(easy, CURLINFO_CONNECT_TIME_T, &connect_usec) == CURLE_OK && connect_usec == 0;
}

static int call_attempt(EtcdCall *call);

static void on_request_done(CurlGlueRequest *req, int error, long http_status, const char *body,
                            size_t body_size, void *userdata) {
        EtcdCall *call = userdata;
        EtcdClient *c = call->client;
        EtcdAnswer a = {};
        bool retry;
        int r;

        if (error == 0)
                error = etcd_answer_parse(call->op, c->prefix, http_status, body, body_size, &a);
        else
                error = etcd_answer_fail(&a, error, "etcd at %s: %s", c->endpoints[call->endpoint],
                                         curl_glue_request_message(req));

        /* 503, gRPC Unavailable: this member has no leader or is shutting down */
        retry = error_is_unreached(error, curl_glue_request_easy(req)) || error == -EAGAIN;
        call->request = curl_glue_request_free(req);

        if (retry && call->tried < c->n_endpoints) {
                call->endpoint = (call->endpoint + 1) % c->n_endpoints;
                r = call_attempt(call);
                if (r >= 0) {
                        etcd_answer_done(&a);
                        return;
                }
                if (r != -ETIMEDOUT)    /* out of time: report what the last member did */
                        error = etcd_answer_fail(&a, r, "Failed to try the next etcd endpoint: %s", strerror(-r));
        } else if (retry && c->n_endpoints > 1) {
                _cleanup_free_ char *last = STEAL(a.message);

                error = etcd_answer_fail(&a, error, "None of the %zu etcd endpoints answered; the last, %s",
                                         c->n_endpoints, last ?: "?");
        }
        if (error >= 0)
                c->current = call->endpoint;
        call_finish(call, error, &a);
        etcd_answer_done(&a);
}

static CURLcode attempt_setup(EtcdCall *call, CURL *e, uint64_t left) {
        EtcdClient *c = call->client;
        long timeout_ms = (long) MIN(USEC_TO_MSEC_UP(left), (uint64_t) LONG_MAX);
        long connect_ms = (long) MIN((uint64_t) timeout_ms, USEC_TO_MSEC_UP(c->connect_timeout_usec));
        CURLcode code;

        code = curl_easy_setopt(e, CURLOPT_POSTFIELDS, call->body);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) strlen(call->body));
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
        if (code == CURLE_OK && c->ca_file)
                code = curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
        if (code == CURLE_OK && c->cert_file)
                code = curl_easy_setopt(e, CURLOPT_SSLCERT, c->cert_file);
        if (code == CURLE_OK && c->key_file)
                code = curl_easy_setopt(e, CURLOPT_SSLKEY, c->key_file);
        return code;
}

/* One HTTP request of @call to its current endpoint. Return: 0, -ETIMEDOUT (no time left), -errno. */
static int call_attempt(EtcdCall *call) {
        EtcdClient *c = call->client;
        _cleanup_(curl_glue_request_freep) CurlGlueRequest *req = NULL;
        _cleanup_free_ char *url = NULL;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        int r;

        assert(!call->request);

        if (now >= call->deadline)
                return -ETIMEDOUT;
        if (asprintf(&url, "%s%s", c->endpoints[call->endpoint], etcd_op_path(call->op)) < 0)
                return -ENOMEM;

        r = curl_glue_request_new(c->glue, url, c->max_response_size, &req);
        if (r < 0)
                return r;
        if (attempt_setup(call, curl_glue_request_easy(req), call->deadline - now) != CURLE_OK)
                return -EIO;
        r = curl_glue_request_start(req, on_request_done, call);
        if (r < 0)
                return r;

        call->tried++;
        call->request = STEAL(req);
        return 0;
}

/* Starts @op with @req; the keys in @req are the caller's, without the prefix yet. */
static int call_start(EtcdClient *c, EtcdOp op, const EtcdRequest *req, EtcdCallback callback,
                      void *userdata, EtcdCall **ret_call) {
        _cleanup_(call_freep) EtcdCall *call = NULL;
        _cleanup_free_ char *key = NULL, *range_end = NULL;
        EtcdRequest whole = *req;
        size_t range_end_size = 0;
        int r;

        assert(c);
        assert(callback);

        if (req->key) {
                if (asprintf(&key, "%s%s", c->prefix, req->key) < 0)
                        return -ENOMEM;
                whole.key = key;
                whole.key_size = strlen(key);
        }
        if (op == ETCD_OP_RANGE) {
                r = etcd_prefix_range_end(whole.key, whole.key_size, &range_end, &range_end_size);
                if (r < 0)
                        return r;
                whole.range_end = range_end;
                whole.range_end_size = range_end_size;
                if (whole.key_size == 0) {      /* everything: from "\0" */
                        whole.key = "";
                        whole.key_size = 1;
                }
        }

        call = calloc(1, sizeof(*call));
        if (!call)
                return -ENOMEM;
        *call = (EtcdCall) {
                .op = op,
                .callback = callback,
                .userdata = userdata,
                .deadline = now_usec(CLOCK_MONOTONIC) + c->timeout_usec,
                .endpoint = c->current,
        };
        r = etcd_request_body(op, &whole, &call->body);
        if (r < 0)
                return r;

        call->client = c;
        call->next = c->calls;
        if (c->calls)
                c->calls->prev = call;
        c->calls = call;

        r = call_attempt(call);
        if (r < 0)
                return r;

        if (ret_call)
                *ret_call = call;
        call = NULL;                    /* the client's list holds it until it ends */
        return 0;
}

static int validate_key(const char *key) {
        return isempty(key) ? -EINVAL : 0;
}

int etcd_lease_grant(EtcdClient *c, int64_t ttl_sec, EtcdCallback callback, void *userdata, EtcdCall **ret_call) {
        if (ttl_sec <= 0)
                return -EINVAL;
        return call_start(c, ETCD_OP_LEASE_GRANT, &(EtcdRequest) { .ttl = ttl_sec }, callback, userdata, ret_call);
}

int etcd_lease_keepalive(EtcdClient *c, int64_t lease_id, EtcdCallback callback, void *userdata,
                         EtcdCall **ret_call) {
        if (lease_id <= 0)
                return -EINVAL;
        return call_start(c, ETCD_OP_LEASE_KEEPALIVE, &(EtcdRequest) { .lease_id = lease_id }, callback, userdata,
                          ret_call);
}

int etcd_lease_revoke(EtcdClient *c, int64_t lease_id, EtcdCallback callback, void *userdata, EtcdCall **ret_call) {
        if (lease_id <= 0)
                return -EINVAL;
        return call_start(c, ETCD_OP_LEASE_REVOKE, &(EtcdRequest) { .lease_id = lease_id }, callback, userdata,
                          ret_call);
}

int etcd_put(EtcdClient *c, const char *key, const char *value, int64_t lease_id, EtcdCallback callback,
             void *userdata, EtcdCall **ret_call) {
        if (validate_key(key) < 0 || !value || lease_id < 0)
                return -EINVAL;
        return call_start(c, ETCD_OP_PUT, &(EtcdRequest) { .key = key, .value = value, .lease_id = lease_id },
                          callback, userdata, ret_call);
}

int etcd_get(EtcdClient *c, const char *key, EtcdCallback callback, void *userdata, EtcdCall **ret_call) {
        if (validate_key(key) < 0)
                return -EINVAL;
        return call_start(c, ETCD_OP_GET, &(EtcdRequest) { .key = key }, callback, userdata, ret_call);
}

int etcd_range_prefix(EtcdClient *c, const char *prefix, EtcdCallback callback, void *userdata,
                      EtcdCall **ret_call) {
        return call_start(c, ETCD_OP_RANGE, &(EtcdRequest) { .key = prefix ?: "" }, callback, userdata, ret_call);
}

int etcd_delete(EtcdClient *c, const char *key, EtcdCallback callback, void *userdata, EtcdCall **ret_call) {
        if (validate_key(key) < 0)
                return -EINVAL;
        return call_start(c, ETCD_OP_DELETE, &(EtcdRequest) { .key = key }, callback, userdata, ret_call);
}

int etcd_create_if_absent(EtcdClient *c, const char *key, const char *value, int64_t lease_id,
                          EtcdCallback callback, void *userdata, EtcdCall **ret_call) {
        if (validate_key(key) < 0 || !value || lease_id < 0)
                return -EINVAL;
        return call_start(c, ETCD_OP_CREATE, &(EtcdRequest) { .key = key, .value = value, .lease_id = lease_id },
                          callback, userdata, ret_call);
}

int etcd_compare_and_put(EtcdClient *c, const char *key, const char *value, int64_t expected_mod_revision,
                         int64_t lease_id, EtcdCallback callback, void *userdata, EtcdCall **ret_call) {
        if (validate_key(key) < 0 || !value || lease_id < 0 || expected_mod_revision < 0)
                return -EINVAL;
        return call_start(c, ETCD_OP_COMPARE_AND_PUT,
                          &(EtcdRequest) { .key = key, .value = value, .lease_id = lease_id,
                                           .mod_revision = expected_mod_revision },
                          callback, userdata, ret_call);
}

/* A TLS file: copied, and readable now (an error at the start rather than at each call's handshake). */
static int tls_file(const char *path, char **ret) {
        if (isempty(path)) {
                *ret = NULL;
                return 0;
        }
        if (access(path, R_OK) < 0)
                return -errno;
        *ret = strdup(path);
        return *ret ? 0 : -ENOMEM;
}

static int client_set_endpoints(EtcdClient *c, char *const *endpoints) {
        size_t n = strv_length(endpoints);

        if (n == 0)
                return -EINVAL;
        c->endpoints = calloc(n + 1, sizeof(char *));
        if (!c->endpoints)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *e = endpoints[i];
                size_t len = strlen(e);

                if (!(strneq(e, "http://", 7) && len > 7) && !(strneq(e, "https://", 8) && len > 8))
                        return -EINVAL;
                while (len > 0 && e[len - 1] == '/')
                        len--;
                c->endpoints[i] = strndup(e, len);
                if (!c->endpoints[i])
                        return -ENOMEM;
                c->n_endpoints = i + 1;
        }
        return 0;
}

int etcd_client_new(sd_event *event, const EtcdClientConfig *config, EtcdClient **ret) {
        _cleanup_(etcd_client_freep) EtcdClient *c = NULL;
        struct curl_slist *l;
        int r;

        assert(event);
        assert(config);
        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->event = sd_event_ref(event);
        c->timeout_usec = config->timeout_usec ?: ETCD_TIMEOUT_USEC_DEFAULT;
        c->connect_timeout_usec = config->connect_timeout_usec ?: ETCD_CONNECT_TIMEOUT_USEC_DEFAULT;
        c->max_response_size = MIN(config->max_response_size ?: ETCD_RESPONSE_SIZE_MAX_DEFAULT, (size_t) INT_MAX);

        r = client_set_endpoints(c, config->endpoints);
        if (r < 0)
                return r;
        c->prefix = strdup(config->prefix ?: "");
        if (!c->prefix)
                return -ENOMEM;
        r = tls_file(config->ca_file, &c->ca_file);
        if (r >= 0)
                r = tls_file(config->cert_file, &c->cert_file);
        if (r >= 0)
                r = tls_file(config->key_file, &c->key_file);
        if (r < 0)
                return r;

        /* no "Expect: 100-continue" round trip before a body */
        c->headers = curl_slist_append(NULL, "Content-Type: application/json");
        if (!c->headers)
                return -ENOMEM;
        l = curl_slist_append(c->headers, "Expect:");
        if (!l)
                return -ENOMEM;
        c->headers = l;

        r = curl_glue_new(event, &c->glue);
        if (r < 0)
                return r;

        *ret = STEAL(c);
        return 0;
}

EtcdClient *etcd_client_free(EtcdClient *c) {
        if (!c)
                return NULL;
        while (c->calls)
                (void) call_free(c->calls);
        c->glue = curl_glue_free(c->glue);
        curl_slist_free_all(c->headers);
        strv_free(c->endpoints);
        free(c->prefix);
        free(c->ca_file);
        free(c->cert_file);
        free(c->key_file);
        sd_event_unref(c->event);
        free(c);
        return NULL;
}
