/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fleet-etcd: src/fleet/etcd.c against a real etcd cluster (issue 24), driven by its own sd-event
 * loop. Run by tests/helpers/etcd-cluster.py, which starts the members on loopback and passes
 * their client URLs in $ETCD_ENDPOINTS (three, comma-separated). Besides etcd, the loop holds a
 * few sockets of its own: a bound port nobody listens on (dead), one that listens and never
 * accepts (a black hole) and tiny HTTP servers that answer what etcd never would. TAP on stdout.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "fake-http-server.h"
#include "fleet/etcd.h"
#include "util/macro.h"
#include "util/strv.h"
#include "util/time-util.h"

#define CALL_WAIT_USEC (20 * USEC_PER_SEC)

static sd_event *event;
static unsigned n_tests, n_failed;

static _printf_(2, 3) void check_report(bool ok, const char *fmt, ...) {
        va_list ap;

        n_tests++;
        if (!ok)
                n_failed++;
        printf("%s %u - ", ok ? "ok" : "not ok", n_tests);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
}

/* One TAP line. The condition (which may run calls) is evaluated before the line's arguments. */
#define check(cond, ...)                                                        \
        do {                                                                    \
                bool _ok = (cond);                                              \
                check_report(_ok, __VA_ARGS__);                                 \
        } while (0)

/* ---- one call's answer, copied out of the callback ---- */

typedef struct Reply {
        bool done;
        unsigned calls;                 /* how often the callback ran */
        int error;
        char *message, *endpoint;
        int64_t revision, lease_id, ttl, deleted;
        bool succeeded;
        EtcdKeyValue *kvs;
        size_t n_kvs;
} Reply;

static void reply_clear(Reply *r) {
        for (size_t i = 0; i < r->n_kvs; i++) {
                free(r->kvs[i].key);
                free(r->kvs[i].value);
        }
        free(r->kvs);
        free(r->message);
        free(r->endpoint);
        *r = (Reply) {};
}

static char *xstrdup(const char *s) {
        char *p = strdup(s ?: "");

        if (!p)
                abort();
        return p;
}

static void on_reply(int error, const EtcdResult *result, void *userdata) {
        Reply *r = userdata;

        r->calls++;
        r->done = true;
        r->error = error;
        r->message = xstrdup(result->message);
        r->endpoint = xstrdup(result->endpoint);
        r->revision = result->revision;
        r->lease_id = result->lease_id;
        r->ttl = result->ttl;
        r->deleted = result->deleted;
        r->succeeded = result->succeeded;
        r->kvs = calloc(result->n_kvs + 1, sizeof(EtcdKeyValue));
        if (!r->kvs)
                abort();
        for (size_t i = 0; i < result->n_kvs; i++) {
                r->kvs[i] = result->kvs[i];
                r->kvs[i].key = xstrdup(result->kvs[i].key);
                r->kvs[i].value = xstrdup(result->kvs[i].value);
        }
        r->n_kvs = result->n_kvs;
}

/* Runs the loop until every reply of @replies is done, or @usec passed. Return: true if all are. */
static bool wait_for(Reply *const *replies, size_t n, uint64_t usec) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + usec;

        for (;;) {
                bool all = true;
                uint64_t now = now_usec(CLOCK_MONOTONIC);

                for (size_t i = 0; i < n; i++)
                        all = all && replies[i]->done;
                if (all)
                        return true;
                if (now >= deadline)
                        return false;
                if (sd_event_run(event, deadline - now) < 0)
                        return false;
        }
}

/* Runs the loop for @usec, whatever happens. */
static void spin(uint64_t usec) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + usec;

        for (uint64_t now; (now = now_usec(CLOCK_MONOTONIC)) < deadline;)
                (void) sd_event_run(event, deadline - now);
}

/* A call run to its end: its start's return, else the callback's error (-ETIME: no callback in time). */
#define SYNC(reply, call)                                                       \
        ({                                                                      \
                Reply *_rp = (reply);                                           \
                int _r;                                                         \
                reply_clear(_rp);                                               \
                _r = (call);                                                    \
                if (_r >= 0)                                                    \
                        _r = wait_for(&_rp, 1, CALL_WAIT_USEC) ? _rp->error : -ETIME; \
                _r;                                                             \
        })

#define MSG(r) ((r).message ?: "")
#define EP(r) ((r).endpoint ?: "")

static const char *kv_value(const Reply *r, size_t i) {
        return i < r->n_kvs ? r->kvs[i].value : "(none)";
}

/* ---- sockets of the test's own: dead ports, a black hole, fake servers (fake-http-server.h) ---- */

/* A server answering @answer (taken over). Return: it, or NULL (the reason on a TAP comment). */
static FakeHttpServer *fake_server_new(char *answer) {
        FakeHttpServer *server = NULL;
        int r;

        r = fake_http_server_new(event, answer, 0, &server);
        if (r < 0)
                printf("# a loopback server of the test's own: %s\n", strerror(-r));
        return server;
}

static EtcdClient *client_new(char **endpoints, const char *prefix, uint64_t timeout_usec, size_t max_response) {
        EtcdClient *c = NULL;
        int r;

        r = etcd_client_new(event, &(EtcdClientConfig) {
                                .endpoints = endpoints,
                                .prefix = prefix,
                                .timeout_usec = timeout_usec,
                                .max_response_size = max_response,
                        }, &c);
        if (r < 0) {
                printf("Bail out! etcd_client_new(): %s\n", strerror(-r));
                exit(1);
        }
        return c;
}

/* ---- the cases ---- */

typedef struct Ctx {
        char **endpoints;               /* the three members */
        char *prefix;
        EtcdClient *a, *b;              /* the same prefix; b starts at the last member */
} Ctx;

static void test_round_trip(Ctx *t) {
        _cleanup_(reply_clear) Reply lease = {}, put = {}, get = {}, r = {};
        const char *value = "{\"node\":\"a\",\"epoch\":1}";

        check(SYNC(&lease, etcd_lease_grant(t->a, 10, on_reply, &lease, NULL)) == 0 &&
              lease.lease_id > 0 && lease.ttl == 10,
              "lease grant: id %" PRIi64 ", ttl %" PRIi64 " (%s)", lease.lease_id, lease.ttl, MSG(lease));
        check(SYNC(&put, etcd_put(t->a, "ws/one", value, lease.lease_id, on_reply, &put, NULL)) == 0 &&
              put.revision > 0,
              "put with the lease: revision %" PRIi64 " (%s)", put.revision, MSG(put));
        check(SYNC(&get, etcd_get(t->b, "ws/one", on_reply, &get, NULL)) == 0 && get.n_kvs == 1 &&
              streq(get.kvs[0].key, "ws/one") && streq(get.kvs[0].value, value) &&
              get.kvs[0].value_size == strlen(value),
              "get through another member: key '%s', value '%s' (%s)",
              get.n_kvs ? get.kvs[0].key : "", kv_value(&get, 0), MSG(get));
        check(get.n_kvs == 1 && get.kvs[0].mod_revision == put.revision &&
              get.kvs[0].create_revision == put.revision && get.kvs[0].version == 1 &&
              get.kvs[0].lease == lease.lease_id,
              "get: mod_revision %" PRIi64 " and create_revision %" PRIi64 " are the put's %" PRIi64
              ", lease %" PRIi64, get.n_kvs ? get.kvs[0].mod_revision : -1,
              get.n_kvs ? get.kvs[0].create_revision : -1, put.revision, get.n_kvs ? get.kvs[0].lease : -1);
        check(SYNC(&r, etcd_put(t->a, "ws/one", "second", 0, on_reply, &r, NULL)) == 0 &&
              SYNC(&get, etcd_get(t->a, "ws/one", on_reply, &get, NULL)) == 0 && get.n_kvs == 1 &&
              streq(get.kvs[0].value, "second") && get.kvs[0].mod_revision == r.revision &&
              get.kvs[0].create_revision == put.revision && get.kvs[0].version == 2 && get.kvs[0].lease == 0,
              "a second put without lease: mod_revision %" PRIi64 " moves, create_revision stays, lease 0",
              r.revision);
        check(SYNC(&r, etcd_get(t->a, "ws/absent", on_reply, &r, NULL)) == -ENOENT,
              "get of an absent key: %s (%s)", strerror(-r.error), MSG(r));
        check(SYNC(&r, etcd_put(t->a, "ws/bad-lease", "x", 424242, on_reply, &r, NULL)) == -ENOENT,
              "put under a lease that does not exist: %s (%s)", strerror(-r.error), MSG(r));

}

static void test_range(Ctx *t) {
        static const char *const keys[] = { "list/a", "list/b", "list/c/d", "lister", "other/list/x" };
        _cleanup_(etcd_client_freep) EtcdClient *other = client_new(t->endpoints, "/sr-test-other/", 0, 0);
        _cleanup_(reply_clear) Reply r = {};
        int failures = 0;

        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (SYNC(&r, etcd_put(t->a, keys[i], keys[i], 0, on_reply, &r, NULL)) < 0)
                        failures++;
        check(failures == 0, "%zu puts for the range", ELEMENTSOF(keys));

        check(SYNC(&r, etcd_range_prefix(t->b, "list/", on_reply, &r, NULL)) == 0 && r.n_kvs == 3 &&
              streq(r.kvs[0].key, "list/a") && streq(r.kvs[1].key, "list/b") && streq(r.kvs[2].key, "list/c/d") &&
              streq(r.kvs[0].value, "list/a") && streq(r.kvs[2].value, "list/c/d") && r.kvs[2].mod_revision > 0,
              "range_prefix 'list/': exactly list/a, list/b, list/c/d (%zu keys: %s %s %s)", r.n_kvs,
              r.n_kvs > 0 ? r.kvs[0].key : "", r.n_kvs > 1 ? r.kvs[1].key : "", r.n_kvs > 2 ? r.kvs[2].key : "");
        check(SYNC(&r, etcd_range_prefix(t->a, "nothing/", on_reply, &r, NULL)) == 0 && r.n_kvs == 0,
              "range_prefix of a prefix without keys: none (%zu)", r.n_kvs);
        /* with ws/one of test_round_trip(), sorted */
        check(SYNC(&r, etcd_range_prefix(t->a, "", on_reply, &r, NULL)) == 0 && r.n_kvs == ELEMENTSOF(keys) + 1 &&
              streq(r.kvs[0].key, "list/a") && streq(r.kvs[r.n_kvs - 1].key, "ws/one"),
              "range_prefix '': the client's whole prefix, keys without it (%zu, first '%s')", r.n_kvs,
              r.n_kvs ? r.kvs[0].key : "");
        check(SYNC(&r, etcd_range_prefix(other, "", on_reply, &r, NULL)) == 0 && r.n_kvs == 0,
              "another prefix sees none of these keys (%zu)", r.n_kvs);

        check(SYNC(&r, etcd_delete(t->a, "list/b", on_reply, &r, NULL)) == 0 && r.deleted == 1,
              "delete list/b: deleted %" PRIi64, r.deleted);
        check(SYNC(&r, etcd_delete(t->a, "list/b", on_reply, &r, NULL)) == 0 && r.deleted == 0,
              "delete list/b again: deleted %" PRIi64, r.deleted);
        check(SYNC(&r, etcd_range_prefix(t->a, "list/", on_reply, &r, NULL)) == 0 && r.n_kvs == 2 &&
              streq(r.kvs[0].key, "list/a") && streq(r.kvs[1].key, "list/c/d"),
              "range_prefix after the delete: list/a, list/c/d (%zu)", r.n_kvs);
}

static void test_race(Ctx *t) {
        for (unsigned round = 0; round < 3; round++) {
                _cleanup_(reply_clear) Reply ra = {}, rb = {}, g = {};
                Reply *both[] = { &ra, &rb };
                char key[64];
                int r1, r2;

                (void) snprintf(key, sizeof(key), "race/%u", round);
                r1 = etcd_create_if_absent(t->a, key, "node-a", 0, on_reply, &ra, NULL);
                r2 = etcd_create_if_absent(t->b, key, "node-b", 0, on_reply, &rb, NULL);
                if (r1 < 0 || r2 < 0 || !wait_for(both, 2, CALL_WAIT_USEC) || ra.error < 0 || rb.error < 0) {
                        check(false, "race %u: both calls answer (%s / %s)", round, MSG(ra), MSG(rb));
                        continue;
                }
                Reply *win = ra.succeeded ? &ra : &rb, *lose = ra.succeeded ? &rb : &ra;
                const char *winner = ra.succeeded ? "node-a" : "node-b";

                check(ra.succeeded != rb.succeeded,
                      "race %u for '%s': exactly one wins (a %s, b %s)", round, key,
                      ra.succeeded ? "won" : "lost", rb.succeeded ? "won" : "lost");
                check(!lose->succeeded && lose->n_kvs == 1 && streq(lose->kvs[0].value, winner) &&
                      lose->kvs[0].mod_revision == win->revision && lose->kvs[0].create_revision == win->revision,
                      "race %u: the loser sees the winner's value '%s' at %" PRIi64 " (saw '%s' at %" PRIi64 ")",
                      round, winner, win->revision, kv_value(lose, 0), lose->n_kvs ? lose->kvs[0].mod_revision : -1);
                check(SYNC(&g, etcd_get(t->a, key, on_reply, &g, NULL)) == 0 && streq(kv_value(&g, 0), winner),
                      "race %u: the key holds the winner's value ('%s')", round, kv_value(&g, 0));
        }
}

static void test_compare_and_put(Ctx *t) {
        _cleanup_(reply_clear) Reply p1 = {}, p2 = {}, r = {}, g = {};

        check(SYNC(&p1, etcd_put(t->a, "cas", "v1", 0, on_reply, &p1, NULL)) == 0 &&
              SYNC(&p2, etcd_put(t->a, "cas", "v2", 0, on_reply, &p2, NULL)) == 0 && p2.revision > p1.revision,
              "two puts: revisions %" PRIi64 " < %" PRIi64, p1.revision, p2.revision);
        check(SYNC(&r, etcd_compare_and_put(t->b, "cas", "stale", p1.revision, 0, on_reply, &r, NULL)) == 0 &&
              !r.succeeded && r.n_kvs == 1 && streq(r.kvs[0].value, "v2") && r.kvs[0].mod_revision == p2.revision,
              "compare_and_put with the stale revision %" PRIi64 " refused; the key as it is: '%s' at %" PRIi64,
              p1.revision, kv_value(&r, 0), r.n_kvs ? r.kvs[0].mod_revision : -1);
        check(SYNC(&g, etcd_get(t->a, "cas", on_reply, &g, NULL)) == 0 && streq(kv_value(&g, 0), "v2"),
              "the refused compare_and_put changed nothing ('%s')", kv_value(&g, 0));
        check(SYNC(&r, etcd_compare_and_put(t->b, "cas", "v3", p2.revision, 0, on_reply, &r, NULL)) == 0 &&
              r.succeeded && r.revision > p2.revision,
              "compare_and_put with the current revision %" PRIi64 " succeeds: new revision %" PRIi64,
              p2.revision, r.revision);
        check(SYNC(&g, etcd_get(t->a, "cas", on_reply, &g, NULL)) == 0 && streq(kv_value(&g, 0), "v3") &&
              g.n_kvs == 1 && g.kvs[0].mod_revision == r.revision,
              "the key holds 'v3' at the new revision ('%s' at %" PRIi64 ")", kv_value(&g, 0),
              g.n_kvs ? g.kvs[0].mod_revision : -1);
        check(SYNC(&r, etcd_compare_and_put(t->a, "cas", "v4", p2.revision, 0, on_reply, &r, NULL)) == 0 &&
              !r.succeeded,
              "the same compare_and_put a second time is refused (its revision is stale now)");
        check(SYNC(&r, etcd_compare_and_put(t->a, "cas-absent", "x", 5, 0, on_reply, &r, NULL)) == 0 &&
              !r.succeeded && r.n_kvs == 0,
              "compare_and_put on an absent key: refused, no key (%zu)", r.n_kvs);
}

static void test_leases(Ctx *t) {
        _cleanup_(reply_clear) Reply la = {}, lb = {}, r = {}, ka = {};
        uint64_t start, gone_after = 0;
        bool kept_ok = true, present_first = false;
        int64_t min_ttl = INT64_MAX;

        if (SYNC(&la, etcd_lease_grant(t->a, 2, on_reply, &la, NULL)) < 0 ||
            SYNC(&lb, etcd_lease_grant(t->a, 2, on_reply, &lb, NULL)) < 0 ||
            SYNC(&r, etcd_put(t->a, "lease/gone", "x", la.lease_id, on_reply, &r, NULL)) < 0 ||
            SYNC(&r, etcd_put(t->a, "lease/kept", "y", lb.lease_id, on_reply, &r, NULL)) < 0) {
                check(false, "two leases of TTL 2 and a key under each (%s)", r.message ? MSG(r) : MSG(la));
                return;
        }
        start = now_usec(CLOCK_MONOTONIC);
        check(la.ttl == 2 && lb.ttl == 2, "two leases of TTL 2 (%" PRIi64 ", %" PRIi64 ") and a key under each",
              la.ttl, lb.ttl);

        /* keep b alive every 500 ms; watch the key of a, for at least 4 s and until it is gone */
        for (uint64_t first_elapsed = UINT64_MAX;;) {
                uint64_t elapsed = now_usec(CLOCK_MONOTONIC) - start;

                if (first_elapsed == UINT64_MAX)
                        first_elapsed = elapsed;

                if (SYNC(&ka, etcd_lease_keepalive(t->b, lb.lease_id, on_reply, &ka, NULL)) < 0 || ka.ttl <= 0 ||
                    ka.lease_id != lb.lease_id)
                        kept_ok = false;
                min_ttl = MIN(min_ttl, ka.ttl);
                if (gone_after == 0) {
                        int r1 = SYNC(&r, etcd_get(t->a, "lease/gone", on_reply, &r, NULL));

                        if (elapsed == first_elapsed)
                                present_first = r1 == 0;
                        if (r1 == -ENOENT)
                                gone_after = elapsed;
                }
                if ((gone_after > 0 && elapsed > 4 * USEC_PER_SEC) || elapsed > 15 * USEC_PER_SEC)
                        break;
                spin(500 * USEC_PER_MSEC);
        }
        check(present_first && gone_after > 0,
              "the key of the lease not kept alive: there at first, gone after %.1f s (bound 15 s)",
              (double) gone_after / USEC_PER_SEC);
        check(kept_ok && min_ttl > 0, "every keepalive of the other lease answered, remaining TTL >= %" PRIi64,
              min_ttl);
        check(SYNC(&r, etcd_get(t->a, "lease/kept", on_reply, &r, NULL)) == 0 && streq(kv_value(&r, 0), "y") &&
              r.kvs[0].lease == lb.lease_id,
              "the key of the lease kept alive stays (%s, %.1f s after the grant)", strerror(-r.error),
              (double) (now_usec(CLOCK_MONOTONIC) - start) / USEC_PER_SEC);
        check(SYNC(&r, etcd_lease_keepalive(t->a, la.lease_id, on_reply, &r, NULL)) == -ENOENT,
              "keepalive of the expired lease: %s (%s)", strerror(-r.error), MSG(r));
        check(SYNC(&r, etcd_lease_revoke(t->a, lb.lease_id, on_reply, &r, NULL)) == 0 &&
              SYNC(&r, etcd_get(t->a, "lease/kept", on_reply, &r, NULL)) == -ENOENT,
              "revoking the kept lease deletes its key (%s)", strerror(-r.error));
        check(SYNC(&r, etcd_lease_revoke(t->a, lb.lease_id, on_reply, &r, NULL)) == -ENOENT,
              "revoking it again: %s (%s)", strerror(-r.error), MSG(r));
}

static void test_failover(Ctx *t, int dead_port) {
        _cleanup_free_ char *dead = fake_http_url(dead_port);
        _cleanup_(etcd_client_freep) EtcdClient *c =
                client_new((char *[]) { dead, t->endpoints[1], NULL }, t->prefix, 5 * USEC_PER_SEC, 0);
        _cleanup_(reply_clear) Reply r = {};

        check(SYNC(&r, etcd_put(c, "failover", "here", 0, on_reply, &r, NULL)) == 0 &&
              streq(EP(r), t->endpoints[1]),
              "the first endpoint a dead port: the put answered by %s (%s)", EP(r), strerror(-r.error));
        check(SYNC(&r, etcd_get(c, "failover", on_reply, &r, NULL)) == 0 && streq(kv_value(&r, 0), "here") &&
              streq(EP(r), t->endpoints[1]),
              "the next call goes to the member that answered: get '%s' from %s", kv_value(&r, 0), EP(r));
}

static void test_unreachable(Ctx *t, const int dead_ports[3], int blackhole_port) {
        _cleanup_free_ char *d0 = fake_http_url(dead_ports[0]), *d1 = fake_http_url(dead_ports[1]);
        _cleanup_free_ char *d2 = fake_http_url(dead_ports[2]), *hole = fake_http_url(blackhole_port);
        _cleanup_(etcd_client_freep) EtcdClient *dead = NULL, *slow = NULL;
        _cleanup_(reply_clear) Reply r = {};
        uint64_t start, elapsed;

        dead = client_new((char *[]) { d0, d1, d2, NULL }, t->prefix, 3 * USEC_PER_SEC, 0);
        start = now_usec(CLOCK_MONOTONIC);
        (void) SYNC(&r, etcd_get(dead, "x", on_reply, &r, NULL));
        elapsed = now_usec(CLOCK_MONOTONIC) - start;
        check(r.error == -ECONNREFUSED && elapsed < 3 * USEC_PER_SEC && strstr(MSG(r), d2),
              "all endpoints dead ports: %s after %.2f s (timeout 3 s): '%s'", strerror(-r.error),
              (double) elapsed / USEC_PER_SEC, MSG(r));

        /* it listens and never accepts: the connection is made, no answer ever comes */
        slow = client_new((char *[]) { hole, NULL }, t->prefix, 1 * USEC_PER_SEC, 0);
        start = now_usec(CLOCK_MONOTONIC);
        (void) SYNC(&r, etcd_lease_grant(slow, 5, on_reply, &r, NULL));
        elapsed = now_usec(CLOCK_MONOTONIC) - start;
        check(r.error == -ETIMEDOUT && elapsed >= 900 * USEC_PER_MSEC && elapsed < 4 * USEC_PER_SEC,
              "a member that never answers: %s after %.2f s (timeout 1 s): '%s'", strerror(-r.error),
              (double) elapsed / USEC_PER_SEC, MSG(r));
}

/* A whole HTTP answer: @status line, a JSON content type, @body. */
static char *http_answer(const char *status, const char *body, size_t size) {
        char *s;

        if (asprintf(&s, "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%.*s", status, size, (int) size, body) < 0)
                abort();
        return s;
}

static void test_garbage(Ctx *t) {
        struct {
                const char *name, *status, *body;
                int expect;
                bool grant;             /* a lease grant rather than a get */
        } cases[] = {
                { "200 with a body that is not JSON", "200 OK", "this is no JSON at all\r\n", -EPROTO, false },
                { "an answer that is not HTTP", NULL, "garbage garbage garbage\r\n\r\n", -EPROTO, false },
                { "JSON cut short", "200 OK", "{\"header\":{\"revision\":\"5\"},\"kvs\":[{", -EPROTO, false },
                { "a key of the wrong type", "200 OK", "{\"kvs\":[{\"key\":12345}]}\n", -EPROTO, false },
                { "a revision that is no number", "200 OK", "{\"header\":{\"revision\":\"5x\"}}", -EPROTO, false },
                { "a lease grant without a lease", "200 OK", "{\"header\":{}}", -EPROTO, true },
                { "404 from something else", "404 Not Found", "<html>not here</html>", -EPROTO, false },
                { "503 no leader on the only member", "503 Service Unavailable",
                  "{\"error\":\"etcdserver: no leader\",\"message\":\"etcdserver: no leader\",\"code\":14}", -EAGAIN,
                  false },
        };
        FakeHttpServer *servers[ELEMENTSOF(cases) + 1];
        _cleanup_(reply_clear) Reply r = {};

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *url = NULL;
                _cleanup_(etcd_client_freep) EtcdClient *c = NULL;

                servers[i] = fake_server_new(cases[i].status ?
                                             http_answer(cases[i].status, cases[i].body, strlen(cases[i].body)) :
                                             xstrdup(cases[i].body));
                if (!servers[i]) {
                        check(false, "%s: a server for it", cases[i].name);
                        continue;
                }
                url = fake_http_url(fake_http_server_port(servers[i]));
                c = client_new((char *[]) { url, NULL }, t->prefix, 5 * USEC_PER_SEC, 0);
                (void) SYNC(&r, cases[i].grant ? etcd_lease_grant(c, 5, on_reply, &r, NULL) :
                                                 etcd_get(c, "x", on_reply, &r, NULL));
                check(r.done && r.error == cases[i].expect && fake_http_server_connections(servers[i]) == 1,
                      "%s: %s, '%s' (%u connection)", cases[i].name, strerror(-r.error), MSG(r),
                      fake_http_server_connections(servers[i]));
        }

        /* the 503 member first, a real one next: the call moves on */
        if (servers[ELEMENTSOF(cases) - 1]) {
                _cleanup_free_ char *url = fake_http_url(fake_http_server_port(servers[ELEMENTSOF(cases) - 1]));
                _cleanup_(etcd_client_freep) EtcdClient *c =
                        client_new((char *[]) { url, t->endpoints[2], NULL }, t->prefix, 5 * USEC_PER_SEC, 0);

                check(SYNC(&r, etcd_get(c, "ws/one", on_reply, &r, NULL)) == 0 && streq(EP(r), t->endpoints[2]),
                      "503 from the first member: the next one answers (%s, %s)", strerror(-r.error), EP(r));
        }

        /* an answer over the client's cap */
        {
                _cleanup_free_ char *spaces = malloc(65537);
                size_t i = ELEMENTSOF(cases);

                if (!spaces)
                        abort();
                memset(spaces, ' ', 65536);
                spaces[65536] = '\0';
                servers[i] = fake_server_new(http_answer("200 OK", spaces, 65536));
                if (servers[i]) {
                        _cleanup_free_ char *url = fake_http_url(fake_http_server_port(servers[i]));
                        _cleanup_(etcd_client_freep) EtcdClient *c =
                                client_new((char *[]) { url, NULL }, t->prefix, 5 * USEC_PER_SEC, 4096);

                        check(SYNC(&r, etcd_get(c, "x", on_reply, &r, NULL)) == -E2BIG,
                              "a 64 KiB answer with a 4 KiB cap: %s ('%s')", strerror(-r.error), MSG(r));
                } else
                        check(false, "a server for the 64 KiB answer");
        }
        /* the servers stay until the end: nothing else takes their ports meanwhile */
}

static void test_cancel(Ctx *t, int blackhole_port) {
        _cleanup_free_ char *hole = fake_http_url(blackhole_port);
        _cleanup_(etcd_client_freep) EtcdClient *slow =
                client_new((char *[]) { hole, NULL }, t->prefix, USEC_PER_SEC, 0);
        _cleanup_(reply_clear) Reply r1 = {}, r2 = {}, r3 = {};
        EtcdCall *call = NULL;

        check(etcd_get(slow, "x", on_reply, &r1, &call) == 0 && call, "a call that will time out started");
        spin(200 * USEC_PER_MSEC);
        call = etcd_call_cancel(call);
        check(etcd_put(t->a, "cancelled", "never", 0, on_reply, &r2, &call) == 0 && call, "a put started");
        call = etcd_call_cancel(call);
        /* a call left in flight when its client goes: no callback either */
        check(etcd_get(slow, "y", on_reply, &r3, NULL) == 0, "a call left to etcd_client_free()");
        slow = etcd_client_free(slow);
        spin(1500 * USEC_PER_MSEC);
        check(r1.calls == 0 && r2.calls == 0 && r3.calls == 0,
              "no callback of a cancelled call, past the timeout (%u, %u, %u)", r1.calls, r2.calls, r3.calls);
}

static void test_arguments(Ctx *t) {
        _cleanup_(reply_clear) Reply r = {};
        EtcdClient *c = NULL;

        check(etcd_get(t->a, "", on_reply, &r, NULL) == -EINVAL &&
              etcd_put(t->a, NULL, "v", 0, on_reply, &r, NULL) == -EINVAL &&
              etcd_lease_grant(t->a, 0, on_reply, &r, NULL) == -EINVAL &&
              etcd_compare_and_put(t->a, "k", "v", -1, 0, on_reply, &r, NULL) == -EINVAL,
              "an empty key, no key, a TTL of 0, a negative revision: -EINVAL at once");
        spin(100 * USEC_PER_MSEC);
        check(r.calls == 0, "no callback for a call refused at its start (%u)", r.calls);
        check(etcd_client_new(event, &(EtcdClientConfig) { .endpoints = (char *[]) { "ftp://127.0.0.1:1", NULL } },
                              &c) == -EINVAL &&
              etcd_client_new(event, &(EtcdClientConfig) { .endpoints = (char *[]) { NULL } }, &c) == -EINVAL &&
              !c,
              "a client without endpoints or with one that is not http(s): -EINVAL");
}

static void run_cases(char **endpoints) {
        int dead_fds[3], dead_ports[3], hole_fd, hole_port;
        Ctx t = { .endpoints = endpoints };

        /* bound and not listening: a connect is refused, and nobody else can take the port */
        for (size_t i = 0; i < 3; i++)
                dead_fds[i] = fake_http_loopback_socket(&dead_ports[i]);
        hole_fd = fake_http_loopback_socket(&hole_port);
        if (dead_fds[0] < 0 || dead_fds[1] < 0 || dead_fds[2] < 0 || hole_fd < 0 || listen(hole_fd, 64) < 0) {
                printf("Bail out! loopback sockets of the test's own: %m\n");
                exit(1);
        }
        if (asprintf(&t.prefix, "/sr-test-%i-%" PRIu64 "/", getpid(), now_usec(CLOCK_MONOTONIC)) < 0)
                abort();
        t.a = client_new(endpoints, t.prefix, 5 * USEC_PER_SEC, 0);
        t.b = client_new((char *[]) { endpoints[2], endpoints[1], endpoints[0], NULL }, t.prefix, 5 * USEC_PER_SEC, 0);

        test_round_trip(&t);
        test_range(&t);
        test_race(&t);
        test_compare_and_put(&t);
        test_failover(&t, dead_ports[0]);
        test_unreachable(&t, dead_ports, hole_port);
        test_garbage(&t);
        test_cancel(&t, hole_port);
        test_arguments(&t);
        test_leases(&t);

        t.a = etcd_client_free(t.a);
        t.b = etcd_client_free(t.b);
        free(t.prefix);
        for (size_t i = 0; i < 3; i++)
                safe_close(dead_fds[i]);
        safe_close(hole_fd);
}

/* ---- over TLS (etcd-cluster.py --tls): members that want a client certificate of their CA ---- */

static int tls_get(EtcdClientConfig config, Reply *r) {
        _cleanup_(etcd_client_freep) EtcdClient *c = NULL;
        int k = etcd_client_new(event, &config, &c);

        return k < 0 ? k : SYNC(r, etcd_get(c, "tls/key", on_reply, r, NULL));
}

static void run_tls_cases(char **endpoints, const char *ca, const char *cert, const char *key) {
        _cleanup_(etcd_client_freep) EtcdClient *c = NULL;
        _cleanup_free_ char *prefix = NULL, *missing = NULL;
        _cleanup_(reply_clear) Reply r = {}, lease = {};
        EtcdClientConfig config, no_cert, no_ca, missing_cert;
        int k;

        if (asprintf(&prefix, "/sr-test-tls-%i/", getpid()) < 0 || asprintf(&missing, "%s.missing", cert) < 0)
                abort();
        config = (EtcdClientConfig) { .endpoints = endpoints, .prefix = prefix, .ca_file = ca, .cert_file = cert,
                                      .key_file = key };
        no_cert = no_ca = missing_cert = config;
        no_cert.cert_file = no_cert.key_file = NULL;
        no_ca.ca_file = NULL;
        missing_cert.cert_file = missing;

        k = etcd_client_new(event, &config, &c);
        check(k == 0, "a client with the CA, a client certificate and its key (%s)", strerror(-k));
        if (k < 0)
                return;
        check(SYNC(&r, etcd_put(c, "tls/key", "over TLS", 0, on_reply, &r, NULL)) == 0 &&
              strneq(EP(r), "https://", 8),
              "put over https with a client certificate (%s, %s)", strerror(-r.error), EP(r));
        check(tls_get(config, &r) == 0 && streq(kv_value(&r, 0), "over TLS"),
              "get over https: '%s' (%s)", kv_value(&r, 0), MSG(r));
        check(SYNC(&lease, etcd_lease_grant(c, 5, on_reply, &lease, NULL)) == 0 &&
              SYNC(&r, etcd_lease_keepalive(c, lease.lease_id, on_reply, &r, NULL)) == 0 && r.ttl > 0,
              "a lease granted and kept alive over https: remaining TTL %" PRIi64 " (%s)", r.ttl, MSG(r));

        /* TLS 1.3: the refusal comes as an alert after the client's side of the handshake, so
         * libcurl reports a failed send or receive, whichever it was doing */
        k = tls_get(no_cert, &r);
        check(k < 0 && k != -ETIMEDOUT && k != -ETIME,
              "no client certificate: refused at once, %s ('%s')", strerror(-k), MSG(r));
        k = tls_get(no_ca, &r);
        check(k == -EACCES, "the members' certificate checked against the system's CAs: %s ('%s')",
              strerror(-k), MSG(r));
        k = tls_get(missing_cert, &r);
        check(k == -ENOENT, "a client certificate file that does not exist: %s from etcd_client_new()",
              strerror(-k));
}

int main(int argc, char *argv[]) {
        _cleanup_(strv_freep) char **endpoints = NULL;
        const char *env = getenv("ETCD_ENDPOINTS"), *tls_ca;
        _cleanup_free_ char *copy = NULL;
        char *save = NULL;
        int r;

        if (isempty(env)) {
                printf("Bail out! $ETCD_ENDPOINTS is not set: run this through tests/helpers/etcd-cluster.py\n");
                return 1;
        }
        copy = strdup(env);
        if (!copy)
                abort();
        for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save))
                if (strv_extend(&endpoints, w) < 0)
                        abort();
        /* etcd-cluster.py --tls (it sets ETCD_CERT_FILE and ETCD_KEY_FILE too): the TLS cases only */
        tls_ca = getenv("ETCD_CA_FILE");
        if (!tls_ca && strv_length(endpoints) != 3) {
                printf("Bail out! $ETCD_ENDPOINTS must name 3 members: '%s'\n", env);
                return 1;
        }
        r = sd_event_new(&event);
        if (r < 0) {
                printf("Bail out! sd_event_new(): %s\n", strerror(-r));
                return 1;
        }

        if (tls_ca)
                run_tls_cases(endpoints, tls_ca, getenv("ETCD_CERT_FILE"), getenv("ETCD_KEY_FILE"));
        else
                run_cases(endpoints);

        fake_http_servers_free();
        event = sd_event_unref(event);          /* and the connections still in it */
        printf("1..%u\n", n_tests);
        return n_failed == 0 ? 0 : 1;
}
