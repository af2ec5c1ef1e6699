/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fleet-s3: src/fleet/s3.c against s3rver 3.7.1 (issue 24) in its own sd-event loop, run by
 * tests/helpers/s3-server.sh --verifier tests/helpers/sigv4-check.py (see there for $S3_* and
 * $SIGV4_*). s3rver checks the access key and that x-amz-content-sha256 is there, but neither
 * signatures nor payload hashes, and ignores If-None-Match on PUT: botocore checks the signatures
 * (online through the verifier, offline over requests captured here), and a server of the test's
 * own answers 412. Besides: a port nobody listens on, one that never accepts, canned answers. TAP.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "fake-http-server.h"
#include "fleet/s3.h"
#include "util/macro.h"
#include "util/time-util.h"

#define CALL_WAIT_USEC (20 * USEC_PER_SEC)
#define CAPTURE_MAX (256 * 1024)

extern char **environ;

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

typedef struct Reply {
        bool done;
        unsigned calls;                 /* how often the callback ran */
        int error;
        long status;
        char *message, *code, *etag, *body;
        size_t body_size;
        uint64_t size;
} Reply;

static void reply_clear(Reply *r) {
        free(r->message);
        free(r->code);
        free(r->etag);
        free(r->body);
        *r = (Reply) {};
}

static char *xmemdup(const void *p, size_t n) {
        char *s = malloc(n + 1);

        if (!s)
                abort();
        if (n > 0)
                memcpy(s, p, n);
        s[n] = '\0';
        return s;
}

#define xstrdup(s) ({ const char *_s = (s); _s ? xmemdup(_s, strlen(_s)) : NULL; })

static void on_reply(int error, const S3Result *result, void *userdata) {
        Reply *r = userdata;
        unsigned calls = r->calls;

        reply_clear(r);
        r->calls = calls + 1;
        r->done = true;
        r->error = error;
        r->status = result->http_status;
        r->message = xstrdup(result->message);
        r->code = xstrdup(result->code);
        r->etag = xstrdup(result->etag);
        r->body = result->body ? xmemdup(result->body, result->body_size) : NULL;
        r->body_size = result->body_size;
        r->size = result->size;
}

/* Runs the loop until @r is done, or @usec passed. Return: whether it is done. */
static bool wait_for(Reply *r, uint64_t usec) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + usec;

        for (uint64_t now; !r->done; ) {
                now = now_usec(CLOCK_MONOTONIC);
                if (now >= deadline || sd_event_run(event, deadline - now) < 0)
                        return false;
        }
        return true;
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
                        _r = wait_for(_rp, CALL_WAIT_USEC) ? _rp->error : -ETIME; \
                _r;                                                             \
        })

#define MSG(r) ((r).message ?: "")
#define STR(s) ((s) ?: "(null)")

#define has(s, part) ((s) && strstr((s), (part)))

/* A loopback server of the test's own (fake-http-server.h) answering @answer (taken over), each
 * request kept whole up to CAPTURE_MAX bytes; bails out if it cannot listen. */
static FakeHttpServer *fake_server_new(char *answer) {
        FakeHttpServer *server = NULL;
        int r;

        r = fake_http_server_new(event, answer, CAPTURE_MAX, &server);
        if (r < 0) {
                printf("Bail out! a loopback server of the test's own: %s\n", strerror(-r));
                exit(1);
        }
        return server;
}

/* A whole HTTP answer: @status line, @type, @body. */
static char *http_answer(const char *status, const char *type, const char *body) {
        char *s;

        if (asprintf(&s, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nETag: \"fake\"\r\n"
                     "Connection: close\r\n\r\n%s", status, type, strlen(body), body) < 0)
                abort();
        return s;
}

/* An S3 error document with @code and @message, as the answer @status. */
static char *s3_answer(const char *status, const char *code, const char *message) {
        _cleanup_free_ char *xml = NULL;

        if (asprintf(&xml, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message>"
                     "<RequestId>4442587FB7D0A2F9</RequestId></Error>", code, message) < 0)
                abort();
        return http_answer(status, "application/xml", xml);
}

typedef struct Env {
        const char *endpoint, *bucket, *region, *access_key, *secret;
        const char *verifier, *check, *python3;
        char *prefix;
        S3Client *s3, *raw;             /* s3rver: with the test's prefix, without one */
} Env;

static S3ClientConfig config_of(const Env *env, const char *endpoint) {
        return (S3ClientConfig) {
                .endpoint = endpoint ?: env->endpoint,
                .bucket = env->bucket,
                .region = env->region,
                .access_key_id = env->access_key,
                .secret_access_key = env->secret,
                .prefix = env->prefix,
                .timeout_usec = 5 * USEC_PER_SEC,
        };
}

static S3Client *client_new(S3ClientConfig config) {
        S3Client *c = NULL;
        int r;

        r = s3_client_new(event, &config, &c);
        if (r < 0) {
                printf("Bail out! s3_client_new(%s): %s\n", config.endpoint, strerror(-r));
                exit(1);
        }
        return c;
}

/* A body of @n bytes that has every byte value, NULs included. */
static char *pattern(size_t n, unsigned seed) {
        char *p = malloc(MAX(n, (size_t) 1));

        if (!p)
                abort();
        for (size_t i = 0; i < n; i++)
                p[i] = (char) ((i * 7919u + seed * 31u + (i >> 8)) & 0xff);
        return p;
}

#define SPECIAL_KEY "dir/a b+c~d/\xc3\xa9 \xc3\xbc \xe2\x98\x83.txt"

static void test_round_trip(Env *t) {
        _cleanup_(reply_clear) Reply put = {}, r = {}, r2 = {};
        _cleanup_free_ char *body = pattern(100 * 1024, 1), *whole = NULL;

        check(SYNC(&put, s3_put(t->s3, "objects/ab/cdef", body, 100 * 1024, false, on_reply, &put, NULL)) == 0 &&
              put.status == 200 && !isempty(put.etag),
              "put of 100 KiB with every byte value: HTTP %ld, ETag %s (%s)", put.status, STR(put.etag), MSG(put));
        check(SYNC(&r, s3_head(t->s3, "objects/ab/cdef", on_reply, &r, NULL)) == 0 && r.size == 100 * 1024 &&
              streq(STR(r.etag), STR(put.etag)) && !r.body,
              "head: size %" PRIu64 ", the put's ETag %s, no body (%s)", r.size, STR(r.etag), MSG(r));
        check(SYNC(&r, s3_get(t->s3, "objects/ab/cdef", on_reply, &r, NULL)) == 0 && r.body_size == 100 * 1024 &&
              r.size == r.body_size && memcmp(r.body, body, r.body_size) == 0 && streq(STR(r.etag), STR(put.etag)),
              "get: the same %zu bytes back, ETag %s (%s)", r.body_size, STR(r.etag), MSG(r));
        if (asprintf(&whole, "%sobjects/ab/cdef", t->prefix) < 0)
                abort();
        check(SYNC(&r, s3_get(t->raw, whole, on_reply, &r, NULL)) == 0 && r.body_size == 100 * 1024 &&
              memcmp(r.body, body, r.body_size) == 0,
              "the object is '%s' for a client without the prefix (%s)", whole, MSG(r));

        check(SYNC(&r, s3_put(t->s3, "empty", NULL, 0, false, on_reply, &r, NULL)) == 0 &&
              SYNC(&r2, s3_head(t->s3, "empty", on_reply, &r2, NULL)) == 0 && r2.size == 0 &&
              SYNC(&r, s3_get(t->s3, "empty", on_reply, &r, NULL)) == 0 && r.body_size == 0 && r.body,
              "an empty object: put, head size %" PRIu64 ", get %zu bytes (%s)", r2.size, r.body_size, MSG(r));
        check(SYNC(&r, s3_put(t->s3, SPECIAL_KEY, "special", 7, false, on_reply, &r, NULL)) == 0 &&
              SYNC(&r, s3_get(t->s3, SPECIAL_KEY, on_reply, &r, NULL)) == 0 && streq(STR(r.body), "special"),
              "a key with spaces, '+', '~' and UTF-8: put and get '%s' (%s)", STR(r.body), MSG(r));
        check(SYNC(&r, s3_put(t->s3, "plus/a+b", "plus", 4, false, on_reply, &r, NULL)) == 0 &&
              SYNC(&r, s3_put(t->s3, "plus/a b", "space", 5, false, on_reply, &r, NULL)) == 0 &&
              SYNC(&r, s3_get(t->s3, "plus/a+b", on_reply, &r, NULL)) == 0 && streq(STR(r.body), "plus") &&
              SYNC(&r2, s3_get(t->s3, "plus/a b", on_reply, &r2, NULL)) == 0 && streq(STR(r2.body), "space"),
              "'a+b' and 'a b' are two objects: '%s', '%s'", STR(r.body), STR(r2.body));

        check(SYNC(&r, s3_delete(t->s3, "objects/ab/cdef", on_reply, &r, NULL)) == 0 && r.status == 204,
              "delete: HTTP %ld (%s)", r.status, MSG(r));
        check(SYNC(&r, s3_head(t->s3, "objects/ab/cdef", on_reply, &r, NULL)) == -ENOENT && r.status == 404,
              "head after the delete: %s, HTTP %ld (%s)", strerror(-r.error), r.status, MSG(r));
        check(SYNC(&r, s3_get(t->s3, "objects/ab/cdef", on_reply, &r, NULL)) == -ENOENT &&
              streq(STR(r.code), "NoSuchKey") && has(r.message, "The specified key does not exist."),
              "get after the delete: %s, code %s: '%s'", strerror(-r.error), STR(r.code), MSG(r));
        check(SYNC(&r, s3_delete(t->s3, "objects/ab/cdef", on_reply, &r, NULL)) == 0 && r.status == 204,
              "delete of an absent key: 0, HTTP %ld, as S3 (%s)", r.status, MSG(r));
}

static void test_credentials(Env *t) {
        _cleanup_(reply_clear) Reply r = {};
        S3ClientConfig bad_key = config_of(t, NULL), bad_secret = config_of(t, NULL);
        S3ClientConfig verified = config_of(t, t->verifier), forged = config_of(t, t->verifier);
        _cleanup_(s3_client_freep) S3Client *k = NULL, *s = NULL, *v = NULL, *f = NULL;

        bad_key.access_key_id = "NOSUCHACCESSKEY";
        bad_secret.secret_access_key = forged.secret_access_key = "not-the-secret";
        k = client_new(bad_key);
        s = client_new(bad_secret);
        v = client_new(verified);
        f = client_new(forged);

        check(SYNC(&r, s3_get(k, "empty", on_reply, &r, NULL)) == -EACCES && r.status == 403 &&
              streq(STR(r.code), "InvalidAccessKeyId") && has(r.message, "does not exist in our records"),
              "an unknown access key: %s, code %s: '%s'", strerror(-r.error), STR(r.code), MSG(r));
        check(SYNC(&r, s3_get(s, "empty", on_reply, &r, NULL)) == 0,
              "s3rver 3.7.1 does not check SigV4 signatures: a wrong secret is let in (%s); the verifier "
              "checks them", MSG(r));

        check(SYNC(&r, s3_put(v, "objects/verified", "signed", 6, true, on_reply, &r, NULL)) == 0 && r.status == 200,
              "verifier: a put with a body and If-None-Match signed as botocore signs it (%s)", MSG(r));
        check(SYNC(&r, s3_get(v, "objects/verified", on_reply, &r, NULL)) == 0 && streq(STR(r.body), "verified\n"),
              "verifier: get signed as botocore signs it (%s)", MSG(r));
        check(SYNC(&r, s3_head(v, "objects/verified", on_reply, &r, NULL)) == 0 && r.size == 9,
              "verifier: head signed as botocore signs it, size %" PRIu64 " (%s)", r.size, MSG(r));
        check(SYNC(&r, s3_delete(v, SPECIAL_KEY, on_reply, &r, NULL)) == 0 && r.status == 204,
              "verifier: delete of a key that needs URI encoding signed as botocore signs it (%s)", MSG(r));
        check(SYNC(&r, s3_put(f, "objects/verified", "signed", 6, false, on_reply, &r, NULL)) == -EACCES &&
              r.status == 403 && streq(STR(r.code), "SignatureDoesNotMatch") &&
              has(r.message, "The request signature we calculated does not match"),
              "verifier: a wrong secret: %s, code %s: '%s'", strerror(-r.error), STR(r.code), MSG(r));
        check(SYNC(&r, s3_head(f, "objects/verified", on_reply, &r, NULL)) == -EACCES && !r.code,
              "verifier: a HEAD with a wrong secret (403, no body): %s (%s)", strerror(-r.error), MSG(r));
}

static void test_write_once(Env *t) {
        _cleanup_(reply_clear) Reply r = {};
        FakeHttpServer *server = fake_server_new(s3_answer("412 Precondition Failed", "PreconditionFailed",
                "At least one of the pre-conditions you specified did not hold"));
        _cleanup_free_ char *url = fake_http_url(fake_http_server_port(server));
        _cleanup_(s3_client_freep) S3Client *c = client_new(config_of(t, url));
        const char *last;

        check(SYNC(&r, s3_put(t->s3, "once/x", "first", 5, true, on_reply, &r, NULL)) == 0,
              "write-once put of a new key: 0 (%s)", MSG(r));
        check(SYNC(&r, s3_put(t->s3, "once/x", "second", 6, true, on_reply, &r, NULL)) == 0,
              "s3rver 3.7.1 ignores If-None-Match on PUT: the second write-once put answers 0 (%s)", MSG(r));
        check(SYNC(&r, s3_get(t->s3, "once/x", on_reply, &r, NULL)) == 0 && streq(STR(r.body), "second"),
              "... and s3rver overwrote the object: '%s'", STR(r.body));

        check(SYNC(&r, s3_put(c, "once/x", "third", 5, true, on_reply, &r, NULL)) == -EEXIST && r.status == 412 &&
              streq(STR(r.code), "PreconditionFailed") && has(r.message, "pre-conditions you specified"),
              "412 PreconditionFailed: %s, code %s: '%s'", strerror(-r.error), STR(r.code), MSG(r));
        last = fake_http_server_last_request(server);
        check(has(last, "\r\nIf-None-Match: *\r\n") && has(last, "\r\nx-amz-content-sha256: "),
              "the write-once put carried 'If-None-Match: *' and x-amz-content-sha256");
        (void) SYNC(&r, s3_put(c, "once/x", "third", 5, false, on_reply, &r, NULL));
        last = fake_http_server_last_request(server);
        check(fake_http_server_connections(server) == 2 && last && !has(last, "If-None-Match"),
              "a plain put carries no If-None-Match (%u requests)", fake_http_server_connections(server));
}

static void test_limits(Env *t) {
        _cleanup_(reply_clear) Reply r = {};
        _cleanup_free_ char *big = pattern(8192, 2);
        S3ClientConfig config = config_of(t, NULL);
        _cleanup_(s3_client_freep) S3Client *small = NULL;

        config.max_body_size = 4096;
        small = client_new(config);
        check(s3_put(small, "limits/over", big, 4097, false, on_reply, &r, NULL) == -E2BIG &&
              (spin(50 * USEC_PER_MSEC), r.calls == 0), "a put of 4097 bytes with a cap of 4096: -E2BIG at once, "
              "no callback (%u)", r.calls);
        check(SYNC(&r, s3_put(small, "limits/exact", big, 4096, false, on_reply, &r, NULL)) == 0 &&
              SYNC(&r, s3_get(small, "limits/exact", on_reply, &r, NULL)) == 0 && r.body_size == 4096,
              "4096 bytes, the cap: put and get back %zu (%s)", r.body_size, MSG(r));
        check(SYNC(&r, s3_put(t->s3, "limits/big", big, 8192, false, on_reply, &r, NULL)) == 0 &&
              SYNC(&r, s3_get(small, "limits/big", on_reply, &r, NULL)) == -E2BIG && !r.body &&
              has(r.message, "over the cap of 4096"),
              "a get of 8192 bytes with a cap of 4096: %s: '%s'", strerror(-r.error), MSG(r));
}

static void test_unreachable(Env *t, int dead_port, int hole_port) {
        _cleanup_free_ char *dead = fake_http_url(dead_port), *hole = fake_http_url(hole_port);
        S3ClientConfig config = config_of(t, dead);
        _cleanup_(s3_client_freep) S3Client *d = NULL, *h = NULL;
        _cleanup_(reply_clear) Reply r = {};
        uint64_t start, elapsed;

        config.timeout_usec = 3 * USEC_PER_SEC;
        d = client_new(config);
        start = now_usec(CLOCK_MONOTONIC);
        (void) SYNC(&r, s3_put(d, "x", "y", 1, true, on_reply, &r, NULL));
        elapsed = now_usec(CLOCK_MONOTONIC) - start;
        check(r.error == -ECONNREFUSED && r.status == 0 && elapsed < 2 * USEC_PER_SEC && has(r.message, dead),
              "a dead port: %s after %.2f s (timeout 3 s): '%s'", strerror(-r.error),
              (double) elapsed / USEC_PER_SEC, MSG(r));

        /* it listens and never accepts: the connection is made, no answer ever comes */
        config.endpoint = hole;
        config.timeout_usec = USEC_PER_SEC;
        h = client_new(config);
        start = now_usec(CLOCK_MONOTONIC);
        (void) SYNC(&r, s3_get(h, "x", on_reply, &r, NULL));
        elapsed = now_usec(CLOCK_MONOTONIC) - start;
        check(r.error == -ETIMEDOUT && elapsed >= 900 * USEC_PER_MSEC && elapsed < 4 * USEC_PER_SEC,
              "an endpoint that never answers: %s after %.2f s (timeout 1 s): '%s'", strerror(-r.error),
              (double) elapsed / USEC_PER_SEC, MSG(r));
}

static void test_garbage(Env *t) {
        struct {
                const char *name;
                char *answer;
                bool head;
                int expect;
                const char *code, *part;        /* S3's code, a part of the message */
        } cases[] = {
                { "an answer that is not HTTP", xstrdup("garbage garbage garbage\r\n\r\n"), false, -EPROTO },
                { "HTML 500", http_answer("500 Internal Server Error", "text/html", "<html>oops</html>"), false,
                  -EAGAIN, NULL, "HTTP 500 without an S3 error document" },
                { "a body cut short", xstrdup("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n"
                                              "only ten b"), false, -EPROTO },
                { "503 SlowDown", s3_answer("503 Slow Down", "SlowDown", "Please reduce your request rate."),
                  false, -EAGAIN, "SlowDown", "Please reduce your request rate." },
                { "403 AccessDenied, entities", s3_answer("403 Forbidden", "AccessDenied", "a &amp; b &lt;c&gt;"),
                  false, -EACCES, "AccessDenied", "AccessDenied: a & b <c>" },
                { "404 HTML from something that is not S3", http_answer("404 Not Found", "text/html", "<p>no</p>"),
                  false, -EIO, NULL, "HTTP 404 without an S3 error document" },
                { "301 PermanentRedirect", s3_answer("301 Moved Permanently", "PermanentRedirect", "Use another."),
                  false, -EIO, "PermanentRedirect", "Use another." },
                { "a code of 80 characters", http_answer("400 Bad Request", "application/xml", "<Error><Code>"
                  "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA</Code></Error>"),
                  false, -EIO, NULL, "HTTP 400 without" },
                { "a HEAD answered 200 without Content-Length",
                  xstrdup("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"), true, -EPROTO, NULL,
                  "without a Content-Length" },
        };
        _cleanup_(reply_clear) Reply r = {};

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                FakeHttpServer *server = fake_server_new(cases[i].answer);
                _cleanup_free_ char *url = fake_http_url(fake_http_server_port(server));
                _cleanup_(s3_client_freep) S3Client *c = client_new(config_of(t, url));

                (void) SYNC(&r, (cases[i].head ? s3_head : s3_get)(c, "x", on_reply, &r, NULL));
                check(r.done && r.error == cases[i].expect && streq(STR(r.code), STR(cases[i].code)) &&
                      (!cases[i].part || has(r.message, cases[i].part)) && fake_http_server_connections(server) == 1,
                      "%s: %s, code %s, '%s' (%u connection)", cases[i].name, strerror(-r.error), STR(r.code),
                      MSG(r), fake_http_server_connections(server));
        }
        /* the servers stay until the end: nothing else takes their ports meanwhile */
}

static void test_cancel(Env *t, int hole_port) {
        _cleanup_free_ char *hole = fake_http_url(hole_port);
        S3ClientConfig config = config_of(t, hole);
        _cleanup_(s3_client_freep) S3Client *slow = NULL;
        _cleanup_(reply_clear) Reply r1 = {}, r2 = {}, r3 = {};
        S3Call *call = NULL;

        config.timeout_usec = USEC_PER_SEC;
        slow = client_new(config);
        check(s3_get(slow, "x", on_reply, &r1, &call) == 0 && call, "a call that will time out started");
        spin(200 * USEC_PER_MSEC);
        call = s3_call_cancel(call);
        check(s3_put(t->s3, "cancelled", "never", 5, false, on_reply, &r2, &call) == 0 && call, "a put started");
        call = s3_call_cancel(call);
        /* a call left in flight when its client goes: no callback either */
        check(s3_head(slow, "y", on_reply, &r3, NULL) == 0, "a call left to s3_client_free()");
        slow = s3_client_free(slow);
        spin(1500 * USEC_PER_MSEC);
        check(r1.calls == 0 && r2.calls == 0 && r3.calls == 0,
              "no callback of a cancelled call, past the timeout (%u, %u, %u)", r1.calls, r2.calls, r3.calls);
}

static void test_arguments(Env *t) {
        static const char *const bad_keys[] = { "", "a\nb", "a/../b", "./x", "x/.", "..", "tab\there", NULL };
        static const S3ClientConfig bad[] = {
                { .endpoint = "ftp://127.0.0.1:1" }, { .endpoint = "http://" }, { .endpoint = "http://h:1/path" },
                { .endpoint = "http://h:1?q" }, { .endpoint = "http://user@h:1" }, { .endpoint = "127.0.0.1:9000" },
                { .bucket = "Upper" }, { .bucket = "ab" }, { .bucket = "-ab" }, { .region = "" },
                { .region = "us:east" }, { .access_key_id = "a/b" }, { .secret_access_key = "" },
        };
        _cleanup_(reply_clear) Reply r = {};
        _cleanup_free_ char *long_key = malloc(S3_KEY_SIZE_MAX + 1);
        S3ClientConfig config = config_of(t, NULL);
        unsigned refused = 0, expected = 0;
        S3Client *c = NULL;

        if (!long_key)
                abort();
        memset(long_key, 'k', S3_KEY_SIZE_MAX);
        long_key[S3_KEY_SIZE_MAX] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(bad_keys); i++, expected += 2)
                refused += (s3_get(t->s3, bad_keys[i], on_reply, &r, NULL) == -EINVAL) +
                           (s3_put(t->s3, bad_keys[i], "v", 1, true, on_reply, &r, NULL) == -EINVAL);
        refused += (s3_head(t->s3, long_key, on_reply, &r, NULL) == -EINVAL) +
                   (s3_delete(t->s3, "a/./b", on_reply, &r, NULL) == -EINVAL) +
                   (s3_put(t->s3, "k", NULL, 5, false, on_reply, &r, NULL) == -EINVAL);
        expected += 3;
        check(refused == expected, "empty keys, control characters, '.' and '..' segments, no key, a key over %u "
              "bytes with the prefix, a NULL body: -EINVAL at once (%u of %u)", S3_KEY_SIZE_MAX, refused, expected);
        spin(100 * USEC_PER_MSEC);
        check(r.calls == 0, "no callback for a call refused at its start (%u)", r.calls);

        refused = 0;
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                S3ClientConfig b = config;

                b.endpoint = bad[i].endpoint ?: b.endpoint;
                b.bucket = bad[i].bucket ?: b.bucket;
                b.region = bad[i].region ?: b.region;
                b.access_key_id = bad[i].access_key_id ?: b.access_key_id;
                b.secret_access_key = bad[i].secret_access_key ?: b.secret_access_key;
                refused += s3_client_new(event, &b, &c) == -EINVAL;
        }
        check(refused == ELEMENTSOF(bad) && !c, "endpoints not http(s)://host[:port], bad buckets, regions, "
              "access keys, an empty secret: -EINVAL (%u of %zu)", refused, ELEMENTSOF(bad));
        config.ca_file = "/nonexistent/ca.pem";
        check(s3_client_new(event, &config, &c) == -ENOENT && !c, "a CA file that does not exist: -ENOENT");
}

/* sigv4-check.py check over @files: its exit status; its output (TAP comments) on ours and in *@ret_output. */
static int sigv4_check(Env *t, const char *secret, const char *region, char (*files)[64], size_t n,
                       char **ret_output) {
        char *argv[9 + 8 + 1] = { (char *) t->python3, (char *) t->check, "check", "--access-key", "AKIDEXAMPLE",
                                  "--secret", (char *) secret, "--region", (char *) region };
        posix_spawn_file_actions_t actions;
        _cleanup_close_pair_ int pipefd[2] = { -EBADF, -EBADF };
        char buf[4096], *out = NULL;
        int status = 0, r;
        size_t size = 0;
        FILE *m;
        pid_t pid;

        *ret_output = mfree(*ret_output);
        for (size_t i = 0; i < n && i < 8; i++)
                argv[9 + i] = files[i];
        if (pipe2(pipefd, O_CLOEXEC) < 0 || !(m = open_memstream(&out, &size)))
                abort();
        (void) posix_spawn_file_actions_init(&actions);
        (void) posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
        (void) posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDERR_FILENO);
        r = posix_spawn(&pid, argv[0], &actions, NULL, argv, environ);
        (void) posix_spawn_file_actions_destroy(&actions);
        pipefd[1] = safe_close(pipefd[1]);
        for (ssize_t k; r == 0 && (k = read(pipefd[0], buf, sizeof(buf))) > 0;)
                (void) fwrite(buf, 1, k, m);
        if (fclose(m) != 0)
                abort();
        fputs(out, stdout);
        *ret_output = out;
        while (r == 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        return r != 0 ? -r : WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void test_sigv4(Env *t) {
        const char *secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", *region = "eu-central-1";
        char dir[] = "/tmp/sr-sigv4-XXXXXX", files[7][64], host[64], *p;
        FakeHttpServer *server = fake_server_new(http_answer("200 OK", "application/octet-stream", ""));
        _cleanup_free_ char *url = fake_http_url(fake_http_server_port(server)), *body = pattern(1000, 3), *last = NULL;
        S3ClientConfig config = { .endpoint = url, .bucket = "sigv4-bucket", .region = region,
                                  .access_key_id = "AKIDEXAMPLE", .secret_access_key = secret, .prefix = "snap/" };
        _cleanup_(s3_client_freep) S3Client *good = NULL, *bad = NULL;
        _cleanup_(reply_clear) Reply r = {};
        _cleanup_free_ char *out = NULL;
        unsigned matched = 0;
        int rc;

        if (!mkdtemp(dir)) {
                check(false, "a capture directory: %m");
                return;
        }
        fake_http_server_capture(server, dir);
        good = client_new(config);
        config.secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEz";
        bad = client_new(config);
        (void) snprintf(host, sizeof(host), "\r\nHost: 127.0.0.1:%i\r\n", fake_http_server_port(server));
        check(SYNC(&r, s3_put(good, "objects/ab/0123", body, 1000, true, on_reply, &r, NULL)) == 0 &&
              SYNC(&r, s3_get(good, "objects/ab/0123", on_reply, &r, NULL)) == 0 &&
              SYNC(&r, s3_head(good, "objects/ab/0123", on_reply, &r, NULL)) == 0 &&
              SYNC(&r, s3_put(good, SPECIAL_KEY, "x", 1, false, on_reply, &r, NULL)) == 0 &&
              SYNC(&r, s3_delete(good, SPECIAL_KEY, on_reply, &r, NULL)) == 0 &&
              fake_http_server_requests(server) == 5 && has(fake_http_server_last_request(server), host),
              "put with a body, get, head, put and delete of '%s' captured on port %i (%u)", SPECIAL_KEY,
              fake_http_server_port(server), fake_http_server_requests(server));
        for (size_t i = 0; i < 7; i++)
                (void) snprintf(files[i], sizeof(files[i]), "%s/capture-%02zu.http", dir, i);
        rc = sigv4_check(t, secret, region, files, 5, &out);
        for (p = out; (p = strstr(p, ": ok, botocore's signature: ")); p++)
                matched++;
        check(rc == 0 && matched == 5, "botocore computes the same 5 signatures (exit %i, %u ok)", rc, matched);
        /* the last one, the delete, with its key changed after signing */
        last = xstrdup(fake_http_server_last_request(server));
        p = last ? strstr(last, "/snap/dir/") : NULL;
        if (p) {
                p[6] = 'e';
                fake_http_write_file(files[6], last, strlen(last));
        }

        rc = SYNC(&r, s3_put(bad, "objects/ab/0123", body, 1000, true, on_reply, &r, NULL)) == 0 &&
                fake_http_server_requests(server) == 6 ? sigv4_check(t, secret, region, files + 5, 1, &out) : -1;
        check(rc == 1 && has(out, "MISMATCH") && has(out, "botocore computes"),
              "a put signed with a wrong secret captured: the check fails (exit %i)", rc);
        rc = sigv4_check(t, secret, "us-east-1", files, 1, &out);
        check(rc == 1 && has(out, "credential scope"), "... and for the right signature checked for another "
              "region (exit %i)", rc);

        rc = sigv4_check(t, secret, region, files + 6, 1, &out);
        check(rc == 1 && has(out, "MISMATCH"), "... and for a captured request whose key was changed (exit %i)", rc);

        fake_http_server_capture(server, NULL);         /* @dir is this function's */
        for (size_t i = 0; i < 7; i++)
                (void) unlink(files[i]);
        (void) rmdir(dir);
}

static const char *need(const char *name) {
        const char *v = getenv(name);

        if (isempty(v)) {
                printf("Bail out! $%s is not set: run this through tests/helpers/s3-server.sh --verifier "
                       "tests/helpers/sigv4-check.py\n", name);
                exit(1);
        }
        return v;
}

int main(int argc, char *argv[]) {
        _cleanup_free_ char *slash = NULL;
        int dead_fd, hole_fd, dead_port, hole_port;
        S3ClientConfig raw;
        Env t = {
                .endpoint = need("S3_ENDPOINT"), .bucket = need("S3_BUCKET"), .region = need("S3_REGION"),
                .access_key = need("S3_ACCESS_KEY"), .secret = need("S3_SECRET"), .verifier = need("SIGV4_ENDPOINT"),
                .check = need("SIGV4_CHECK"), .python3 = need("PYTHON3"),
        };

        if (sd_event_new(&event) < 0) {
                printf("Bail out! sd_event_new() failed\n");
                return 1;
        }
        /* bound and not listening: a connect is refused, and nobody else can take the port */
        dead_fd = fake_http_loopback_socket(&dead_port);
        hole_fd = fake_http_loopback_socket(&hole_port);
        if (dead_fd < 0 || hole_fd < 0 || listen(hole_fd, 64) < 0) {
                printf("Bail out! loopback sockets of the test's own: %m\n");
                return 1;
        }
        if (asprintf(&t.prefix, "sr-test-%i-%" PRIu64 "/", getpid(), now_usec(CLOCK_MONOTONIC)) < 0)
                abort();
        t.s3 = client_new(config_of(&t, NULL));
        if (asprintf(&slash, "%s/", t.endpoint) < 0)
                abort();
        raw = config_of(&t, slash);     /* a trailing '/' is fine */
        raw.prefix = NULL;
        t.raw = client_new(raw);

        test_round_trip(&t);
        test_credentials(&t);
        test_write_once(&t);
        test_limits(&t);
        test_unreachable(&t, dead_port, hole_port);
        test_garbage(&t);
        test_cancel(&t, hole_port);
        test_arguments(&t);
        test_sigv4(&t);

        t.s3 = s3_client_free(t.s3);
        t.raw = s3_client_free(t.raw);
        free(t.prefix);
        safe_close(dead_fd);
        safe_close(hole_fd);
        fake_http_servers_free();
        event = sd_event_unref(event);          /* and the connections still in it */
        printf("1..%u\n", n_tests);
        return n_failed == 0 ? 0 : 1;
}
