/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of the Kernel Gateway API (src/api/kg-*.c) through the real HTTP server on a loopback
 * socket: statuses and bodies of the REST routes, the token, the WebSocket upgrade as
 * libmicrohttpd hands it over in our external-epoll mode, and messages both ways. The kernels are
 * the test double tests/helpers/fake-kernel.c (the real ones are src/kernel/'s; the end-to-end
 * test with real kernels is tests/integration/kernels.py).
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include <cmocka.h>

#include "api/kg.h"
#include "core/manager.h"
#include "fake-kernel.h"
#include "http/http-server.h"
#include "http/websocket.h"
#include "util/macro.h"
#include "util/time-util.h"

#define TOKEN "kg-test-token-0123456789"

typedef struct Resp {
        unsigned status;
        char *head;                     /* status line and headers */
        char *body;
        json_object *json;
} Resp;

typedef struct WsMsg {
        uint8_t opcode;
        uint16_t status;
        char *data;
} WsMsg;

typedef struct T {
        sd_event *event;
        Manager m;
        HttpServer *server;
        uint16_t port;
        /* one WebSocket client at a time */
        int ws_fd;
        wslay_event_context_ptr ws;
        WsMsg got[32];
        unsigned n_got;
        bool ws_eof;
} T;

static T t;

static void resp_done(Resp *r) {
        free(r->head);
        free(r->body);
        json_object_put(r->json);
        *r = (Resp) {};
}

static void step(void) {
        assert_true(sd_event_run(t.event, 1000) >= 0);
        if (t.ws) {
                if (wslay_event_want_write(t.ws))
                        (void) wslay_event_send(t.ws);
                if (wslay_event_want_read(t.ws))
                        (void) wslay_event_recv(t.ws);
        }
}

#define WAIT_UNTIL(cond)                                                                \
        do {                                                                            \
                uint64_t _end = now_usec(CLOCK_MONOTONIC) + 20 * USEC_PER_SEC;          \
                while (!(cond)) {                                                       \
                        if (now_usec(CLOCK_MONOTONIC) > _end)                           \
                                fail_msg("timed out waiting for: %s", #cond);            \
                        step();                                                         \
                }                                                                       \
        } while (0)

static int connect_server(void) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(t.port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int r;

        assert_true(fd >= 0);
        r = connect(fd, (struct sockaddr *) &a, sizeof(a));
        assert_true(r == 0 || errno == EINPROGRESS);
        return fd;
}

static void send_all(int fd, const char *s, size_t n) {
        while (n > 0) {
                ssize_t k = send(fd, s, n, MSG_NOSIGNAL);

                if (k < 0 && errno == EAGAIN) {
                        step();
                        continue;
                }
                assert_true(k > 0);
                s += k;
                n -= (size_t) k;
        }
}

/* Reads the answer: its headers, then (but after a 101) its body, by Content-Length or to EOF. */
static void read_response(int fd, bool upgrade, Resp *ret) {
        size_t size = 0, alloc = 0, want = SIZE_MAX;
        char *buf = NULL, *sep = NULL;
        uint64_t end = now_usec(CLOCK_MONOTONIC) + 20 * USEC_PER_SEC;

        for (;;) {
                char tmp[65536];
                ssize_t k;

                if (sep && size >= want)
                        break;
                /* Byte by byte until the head is in: no frame bytes are taken past a 101. */
                k = recv(fd, tmp, sep ? sizeof(tmp) : 1, MSG_DONTWAIT);
                if (k == 0)
                        break;
                if (k < 0) {
                        assert_int_equal(errno, EAGAIN);
                        if (now_usec(CLOCK_MONOTONIC) > end)
                                fail_msg("no answer");
                        step();
                        continue;
                }
                if (size + (size_t) k + 1 > alloc) {
                        alloc = (size + (size_t) k + 1) * 2;
                        buf = realloc(buf, alloc);
                        assert_non_null(buf);
                }
                memcpy(buf + size, tmp, (size_t) k);
                size += (size_t) k;
                buf[size] = 0;
                if (!sep && (sep = strstr(buf, "\r\n\r\n"))) {
                        const char *cl = strcasestr(buf, "\r\nContent-Length: ");
                        unsigned status = 0;

                        assert_int_equal(sscanf(buf, "HTTP/1.1 %u", &status), 1);
                        if (upgrade && status == 101)
                                break;
                        if (cl && cl < sep)
                                want = (size_t) (sep - buf) + 4 + strtoul(cl + 18, NULL, 10);
                }
        }
        assert_non_null(buf);
        sep = strstr(buf, "\r\n\r\n");
        assert_non_null(sep);
        *sep = 0;
        *ret = (Resp) { .head = strdup(buf), .body = strdup(sep + 4) };
        assert_int_equal(sscanf(buf, "HTTP/1.1 %u", &ret->status), 1);
        if (ret->body[0])
                ret->json = json_tokener_parse(ret->body);
        free(buf);
}

static Resp call(const char *method, const char *target, const char *headers, const char *body) {
        char req[8192];
        Resp r;
        int fd, n;

        if (body)
                n = snprintf(req, sizeof(req),
                             "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s"
                             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                             method, target, headers ?: "", strlen(body), body);
        else
                n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s\r\n",
                             method, target, headers ?: "");
        assert_true(n > 0 && (size_t) n < sizeof(req));
        fd = connect_server();
        send_all(fd, req, (size_t) n);
        read_response(fd, false, &r);
        close(fd);
        return r;
}

#define AUTH "Authorization: token " TOKEN "\r\n"

static const char *json_str(json_object *o, const char *key) {
        json_object *v;

        assert_non_null(o);
        if (!json_object_object_get_ex(o, key, &v))
                return NULL;
        return json_object_get_string(v);
}

static void assert_kg_error(const Resp *r, unsigned status, const char *reason) {
        assert_int_equal(r->status, status);
        assert_non_null(r->json);
        assert_string_equal(json_str(r->json, "reason"), reason);
        assert_non_null(json_str(r->json, "message"));
        assert_non_null(strstr(r->head, "application/json"));
}

/* ---- WebSocket client ---------------------------------------------------------------------- */

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *userdata) {
        ssize_t n = recv(t.ws_fd, buf, len, MSG_DONTWAIT);

        if (n > 0)
                return n;
        if (n < 0 && errno == EAGAIN) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        t.ws_eof = true;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *userdata) {
        ssize_t n = send(t.ws_fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);

        if (n >= 0)
                return n;
        wslay_event_set_error(ctx, errno == EAGAIN ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static int ws_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *userdata) {
        memset(buf, 0x3c, len);
        return 0;
}

static void ws_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *userdata) {
        WsMsg *m;

        assert_true(t.n_got < ELEMENTSOF(t.got));
        m = &t.got[t.n_got++];
        m->opcode = arg->opcode;
        m->status = arg->status_code;
        /* Not NUL-terminated, and NULL when empty: copied by length. */
        m->data = malloc(arg->msg_length + 1);
        assert_non_null(m->data);
        if (arg->msg_length > 0)
                memcpy(m->data, arg->msg, arg->msg_length);
        m->data[arg->msg_length] = 0;
}

static Resp ws_open(const char *target, const char *headers) {
        static const struct wslay_event_callbacks cb = {
                .recv_callback = ws_recv, .send_callback = ws_send,
                .genmask_callback = ws_genmask, .on_msg_recv_callback = ws_msg,
        };
        char req[4096];
        Resp r;
        int n;

        n = snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", target, headers);
        assert_true(n > 0 && (size_t) n < sizeof(req));
        t.ws_fd = connect_server();
        send_all(t.ws_fd, req, (size_t) n);
        read_response(t.ws_fd, true, &r);
        if (r.status == 101)
                assert_int_equal(wslay_event_context_client_init(&t.ws, &cb, NULL), 0);
        return r;
}

static void ws_done(void) {
        if (t.ws)
                wslay_event_context_free(t.ws);
        t.ws = NULL;
        if (t.ws_fd >= 0)
                close(t.ws_fd);
        t.ws_fd = -EBADF;
        for (unsigned i = 0; i < t.n_got; i++)
                free(t.got[i].data);
        t.n_got = 0;
        t.ws_eof = false;
}

static void ws_send_text(const char *s) {
        struct wslay_event_msg m = { .opcode = WSLAY_TEXT_FRAME, .msg = (const uint8_t *) s, .msg_length = strlen(s) };

        assert_int_equal(wslay_event_queue_msg(t.ws, &m), 0);
}

/* The messages got whose parent_header.msg_id is @id and whose msg_type is @type. */
static unsigned ws_count(const char *id, const char *type) {
        unsigned n = 0;

        for (unsigned i = 0; i < t.n_got; i++) {
                json_object *o, *p, *v;

                if (t.got[i].opcode != WSLAY_TEXT_FRAME)
                        continue;
                o = json_tokener_parse(t.got[i].data);
                assert_non_null(o);
                if (json_object_object_get_ex(o, "parent_header", &p) && json_object_object_get_ex(p, "msg_id", &v) &&
                    streq(json_object_get_string(v), id) && streq(json_str(o, "msg_type"), type))
                        n++;
                json_object_put(o);
        }
        return n;
}

static const WsMsg *ws_find(uint8_t opcode) {
        for (unsigned i = 0; i < t.n_got; i++)
                if (t.got[i].opcode == opcode)
                        return &t.got[i];
        return NULL;
}

static const char *execute_request(const char *id) {
        static char buf[512];

        (void) snprintf(buf, sizeof(buf),
                        "{\"header\": {\"msg_id\": \"%s\", \"username\": \"docsgpt\", \"session\": \"s1\", "
                        "\"msg_type\": \"execute_request\", \"version\": \"5.3\"}, \"parent_header\": {}, "
                        "\"metadata\": {}, \"content\": {\"code\": \"x = 1\", \"silent\": false, "
                        "\"store_history\": true, \"allow_stdin\": false, \"stop_on_error\": true}, "
                        "\"channel\": \"shell\"}", id);
        return buf;
}

/* ---- fixture -------------------------------------------------------------------------------- */

static uint64_t header_timeout_usec = 30 * USEC_PER_SEC;

static int setup(void **state) {
        static const HttpServerCallbacks cb = { .begin = kg_api_begin, .dispatch = kg_api_dispatch };
        HttpServerLimits limits = {
                .max_connections = 64, .max_connections_per_client = 64,
                .header_timeout_usec = header_timeout_usec, .request_timeout_usec = header_timeout_usec,
                .max_body_bytes = 1024 * 1024, .max_uri_bytes = 8192, .max_headers = 100,
        };
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t l = sizeof(a);
        int fd;

        t = (T) { .ws_fd = -EBADF };
        assert_int_equal(sd_event_new(&t.event), 0);
        t.m.event = t.event;
        t.m.secrets.token = strdup(TOKEN);
        t.m.config.max_request_body_bytes = 64 * 1024;
        t.m.kernels = fake_kernel_manager_new(2);
        assert_non_null(t.m.kernels);
        assert_int_equal(http_server_new(t.event, &limits, &cb, &t.m, &t.server), 0);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *) &a, sizeof(a)), 0);
        assert_int_equal(listen(fd, 16), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *) &a, &l), 0);
        t.port = ntohs(a.sin_port);
        assert_int_equal(http_server_add_listener(t.server, fd), 0);
        return 0;
}

static int teardown(void **state) {
        ws_done();
        /* With WebSockets still open: the server lets their owners go before MHD stops. */
        t.server = http_server_free(t.server);
        t.m.kernels = kernel_manager_free(t.m.kernels);
        free(t.m.secrets.token);
        t.event = sd_event_unref(t.event);
        return 0;
}

static char *create_kernel(void) {
        Resp r = call("POST", "/api/kernels", AUTH, "{\"name\": \"python3\"}");
        char loc[128];
        char *id;

        assert_int_equal(r.status, 201);
        id = strdup(json_str(r.json, "id"));
        (void) snprintf(loc, sizeof(loc), "Location: /api/kernels/%s", id);
        assert_non_null(strcasestr(r.head, loc));
        resp_done(&r);
        return id;
}

/* ---- REST ------------------------------------------------------------------------------------ */

static void test_auth(void **state) {
        Resp r;

        r = call("GET", "/api", NULL, NULL);
        assert_kg_error(&r, 401, "Unauthorized");
        resp_done(&r);
        r = call("GET", "/api", "Authorization: token wrong-token-0123456789\r\n", NULL);
        assert_kg_error(&r, 401, "Unauthorized");
        resp_done(&r);
        /* ?token= is for the WebSocket only. */
        r = call("GET", "/api/kernels?token=" TOKEN, NULL, NULL);
        assert_kg_error(&r, 401, "Unauthorized");
        resp_done(&r);
        r = call("GET", "/api", AUTH, NULL);
        assert_int_equal(r.status, 200);
        assert_non_null(json_str(r.json, "version"));
        resp_done(&r);
        r = call("GET", "/api", "Authorization: Bearer " TOKEN "\r\n", NULL);
        assert_int_equal(r.status, 200);
        resp_done(&r);
}

static void test_kernelspecs(void **state) {
        json_object *v;
        Resp r;

        r = call("GET", "/api/kernelspecs", AUTH, NULL);
        assert_int_equal(r.status, 200);
        assert_string_equal(json_str(r.json, "default"), "python3");
        assert_true(json_object_object_get_ex(r.json, "kernelspecs", &v));
        assert_true(json_object_object_get_ex(v, "python3", &v));
        resp_done(&r);
        r = call("GET", "/api/kernelspecs/python3", AUTH, NULL);
        assert_int_equal(r.status, 200);
        assert_string_equal(json_str(r.json, "name"), "python3");
        resp_done(&r);
        r = call("GET", "/api/kernelspecs/nope", AUTH, NULL);
        assert_kg_error(&r, 404, "Not Found");
        resp_done(&r);
}

static void test_lifecycle(void **state) {
        _cleanup_free_ char *id = create_kernel();
        char path[128];
        Resp r;

        r = call("GET", "/api/kernels", AUTH, NULL);
        assert_int_equal(r.status, 200);
        assert_true(json_object_is_type(r.json, json_type_array));
        assert_int_equal(json_object_array_length(r.json), 1);
        resp_done(&r);

        (void) snprintf(path, sizeof(path), "/api/kernels/%s", id);
        r = call("GET", path, AUTH, NULL);
        assert_int_equal(r.status, 200);
        assert_string_equal(json_str(r.json, "id"), id);
        assert_string_equal(json_str(r.json, "last_activity"), "2026-12-03T17:00:00.000000Z");
        resp_done(&r);

        /* interrupt: no body (DocsGPT), or {} (jupyter_server) */
        (void) snprintf(path, sizeof(path), "/api/kernels/%s/interrupt", id);
        r = call("POST", path, AUTH, NULL);
        assert_int_equal(r.status, 204);
        resp_done(&r);
        r = call("POST", path, AUTH, "{}");
        assert_int_equal(r.status, 204);
        resp_done(&r);
        /* Its members are not read (as the Kernel Gateway); not an object is refused. */
        r = call("POST", path, AUTH, "{\"x\": 1}");
        assert_int_equal(r.status, 204);
        resp_done(&r);
        assert_int_equal(fake_kernel_counters.n_interrupts, 3);
        r = call("POST", path, AUTH, "[1]");
        assert_kg_error(&r, 400, "Bad Request");
        resp_done(&r);
        assert_int_equal(fake_kernel_counters.n_interrupts, 3);

        (void) snprintf(path, sizeof(path), "/api/kernels/%s/restart", id);
        r = call("POST", path, AUTH, "{}");
        assert_int_equal(r.status, 200);
        assert_string_equal(json_str(r.json, "id"), id);
        resp_done(&r);

        (void) snprintf(path, sizeof(path), "/api/kernels/%s", id);
        r = call("DELETE", path, AUTH, NULL);
        assert_int_equal(r.status, 204);
        assert_string_equal(r.body, "");
        resp_done(&r);
        r = call("DELETE", path, AUTH, NULL);
        assert_kg_error(&r, 404, "Not Found");
        assert_non_null(strstr(json_str(r.json, "message"), id));
        resp_done(&r);
        r = call("GET", path, AUTH, NULL);
        assert_kg_error(&r, 404, "Not Found");
        resp_done(&r);
}

static void test_create_refused(void **state) {
        _cleanup_free_ char *a = NULL, *b = NULL;
        Resp r;

        r = call("POST", "/api/kernels", AUTH, "{\"name\": \"nope\"}");
        assert_kg_error(&r, 400, "Bad Request");
        resp_done(&r);
        r = call("POST", "/api/kernels", AUTH, "{\"env\": \"PATH=/x\"}");
        assert_kg_error(&r, 400, "Bad Request");
        resp_done(&r);
        r = call("POST", "/api/kernels", AUTH, "{\"name\": ");
        assert_kg_error(&r, 400, "Bad Request");
        resp_done(&r);
        r = call("POST", "/api/kernels", AUTH, "[1]");
        assert_kg_error(&r, 400, "Bad Request");
        resp_done(&r);
        r = call("POST", "/api/kernels", AUTH, "{\"workspaceId\": \"busy\"}");
        assert_kg_error(&r, 409, "Conflict");
        resp_done(&r);
        /* env: KERNEL_* strings only reach the kernel side */
        r = call("POST", "/api/kernels", AUTH,
                 "{\"env\": {\"KERNEL_USERNAME\": \"u\", \"PATH\": \"/evil\", \"LD_PRELOAD\": \"x\", \"KERNEL_\": \"y\"}}");
        assert_int_equal(r.status, 201);
        assert_int_equal(fake_kernel_counters.n_env_keys, 1);
        a = strdup(json_str(r.json, "id"));
        resp_done(&r);
        /* no body at all: the default spec */
        r = call("POST", "/api/kernels", AUTH, NULL);
        assert_int_equal(r.status, 201);
        b = strdup(json_str(r.json, "id"));
        resp_done(&r);
        /* the cap (2) */
        r = call("POST", "/api/kernels", AUTH, "{}");
        assert_kg_error(&r, 403, "Forbidden");
        assert_non_null(strstr(json_str(r.json, "message"), "Resource Limit"));
        resp_done(&r);
}

static void test_other_routes(void **state) {
        Resp r;

        r = call("GET", "/api/kernels/not-a-kernel-id", AUTH, NULL);
        assert_kg_error(&r, 404, "Not Found");
        resp_done(&r);
        r = call("PUT", "/api/kernels", AUTH, NULL);
        assert_kg_error(&r, 405, "Method Not Allowed");
        assert_non_null(strcasestr(r.head, "Allow: GET, POST"));
        resp_done(&r);
        r = call("GET", "/api/sessions", AUTH, NULL);
        assert_kg_error(&r, 403, "Forbidden");
        resp_done(&r);
        r = call("GET", "/api/kernels/00000001-0000-4000-8000-000000000001/nothing", AUTH, NULL);
        assert_kg_error(&r, 404, "Not Found");
        resp_done(&r);
        assert_true(kg_api_path("/api"));
        assert_true(kg_api_path("/api/kernels/x/channels"));
        assert_true(kg_api_path("/api/kernelspecs"));
        assert_false(kg_api_path("/api/network-policy"));
        assert_false(kg_api_path("/api/kernelsx"));
        assert_false(kg_api_path("/execute"));
}

/* ---- WebSocket ------------------------------------------------------------------------------ */

#define WS_HEADERS(extra) \
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" \
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" extra

static void test_ws_execute(void **state) {
        _cleanup_free_ char *id = create_kernel();
        char path[128];
        Resp r;

        (void) snprintf(path, sizeof(path), "/api/kernels/%s/channels", id);
        /* A new WebSocket per execution, as DocsGPT does: twice. */
        for (int i = 0; i < 2; i++) {
                char msg_id[32];

                r = ws_open(path, WS_HEADERS(AUTH));
                assert_int_equal(r.status, 101);
                assert_non_null(strcasestr(r.head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
                assert_non_null(strcasestr(r.head, "Upgrade: websocket"));
                assert_null(strcasestr(r.head, "Sec-WebSocket-Protocol"));
                resp_done(&r);

                /* Bad messages are dropped, the socket stays. */
                ws_send_text("not json");
                ws_send_text("{\"content\": {}}");
                ws_send_text("{\"header\": {\"msg_id\": \"b\", \"msg_type\": \"execute_request\"}, \"channel\": \"bogus\"}");
                ws_send_text("{\"header\": {\"msg_id\": \"c\", \"msg_type\": \"x\"}, \"channel\": \"iopub\"}");
                (void) snprintf(msg_id, sizeof(msg_id), "m-%d", i);
                ws_send_text(execute_request(msg_id));
                WAIT_UNTIL(ws_count(msg_id, "execute_reply") == 1 && ws_count(msg_id, "status") == 2);
                assert_int_equal(ws_count("b", "execute_reply"), 0);
                assert_int_equal(ws_count("c", "x"), 0);
                assert_null(ws_find(WSLAY_CONNECTION_CLOSE));
                assert_false(t.ws_eof);
                ws_done();
        }
}

static void test_ws_query_token_and_v1(void **state) {
        _cleanup_free_ char *id = create_kernel();
        char path[160];
        Resp r;

        (void) snprintf(path, sizeof(path), "/api/kernels/%s/channels?token=%s&session_id=abc", id, TOKEN);
        r = ws_open(path, WS_HEADERS("Sec-WebSocket-Protocol: chat, v1.kernel.websocket.jupyter.org\r\n"));
        assert_int_equal(r.status, 101);
        assert_non_null(strcasestr(r.head, "Sec-WebSocket-Protocol: v1.kernel.websocket.jupyter.org"));
        resp_done(&r);
}

static void test_ws_refused(void **state) {
        _cleanup_free_ char *id = create_kernel();
        char path[128];
        Resp r;

        (void) snprintf(path, sizeof(path), "/api/kernels/%s/channels", id);
        r = ws_open(path, WS_HEADERS(""));
        assert_kg_error(&r, 401, "Unauthorized");
        resp_done(&r);
        ws_done();
        r = ws_open(path, AUTH "Connection: close\r\n");
        assert_kg_error(&r, 400, "Bad Request");
        resp_done(&r);
        ws_done();
        r = ws_open(path, AUTH "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 8\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n");
        assert_kg_error(&r, 426, "Upgrade Required");
        assert_non_null(strcasestr(r.head, "Sec-WebSocket-Version: 13"));
        resp_done(&r);
        ws_done();
        r = ws_open(path, AUTH "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                    "Sec-WebSocket-Key: c2hvcnQ=\r\n");
        assert_kg_error(&r, 400, "Bad Request");
        resp_done(&r);
        ws_done();
        r = ws_open("/api/kernels/00000009-0000-4000-8000-000000000009/channels", WS_HEADERS(AUTH));
        assert_kg_error(&r, 404, "Not Found");
        resp_done(&r);
        ws_done();
}

static void test_ws_kernel_deleted(void **state) {
        _cleanup_free_ char *id = create_kernel();
        const WsMsg *c;
        char path[128];
        Resp r;

        (void) snprintf(path, sizeof(path), "/api/kernels/%s/channels", id);
        r = ws_open(path, WS_HEADERS(AUTH));
        assert_int_equal(r.status, 101);
        resp_done(&r);
        ws_send_text(execute_request("before"));
        WAIT_UNTIL(ws_count("before", "execute_reply") == 1);

        /* The model counts the connection. */
        (void) snprintf(path, sizeof(path), "/api/kernels/%s", id);
        r = call("GET", path, AUTH, NULL);
        assert_int_equal(r.status, 200);
        assert_string_equal(json_str(r.json, "connections"), "1");
        resp_done(&r);

        r = call("DELETE", path, AUTH, NULL);
        assert_int_equal(r.status, 204);
        resp_done(&r);
        WAIT_UNTIL(ws_find(WSLAY_CONNECTION_CLOSE) != NULL);
        c = ws_find(WSLAY_CONNECTION_CLOSE);
        assert_int_equal(c->status, WEBSOCKET_CLOSE_GOING_AWAY);
        assert_non_null(strstr(c->data + 2, "deleted"));
        /* The close handshake ends and the server lets the connection go. */
        WAIT_UNTIL(t.ws_eof || !wslay_event_want_read(t.ws));
        WAIT_UNTIL(http_server_n_connections(t.server) == 0);
}

static void test_ws_client_closes(void **state) {
        _cleanup_free_ char *id = create_kernel();
        char path[128];
        Resp r;

        (void) snprintf(path, sizeof(path), "/api/kernels/%s/channels", id);
        r = ws_open(path, WS_HEADERS(AUTH));
        assert_int_equal(r.status, 101);
        resp_done(&r);
        assert_int_equal(wslay_event_queue_close(t.ws, 1000, NULL, 0), 0);
        WAIT_UNTIL(ws_find(WSLAY_CONNECTION_CLOSE) != NULL);
        WAIT_UNTIL(http_server_n_connections(t.server) == 0);
        /* Detached: the kernel counts no connection. */
        (void) snprintf(path, sizeof(path), "/api/kernels/%s", id);
        r = call("GET", path, AUTH, NULL);
        assert_string_equal(json_str(r.json, "connections"), "0");
        resp_done(&r);
}

static void test_ws_server_retires(void **state) {
        _cleanup_free_ char *id = create_kernel();
        const WsMsg *c;
        char path[128];
        Resp r;

        (void) snprintf(path, sizeof(path), "/api/kernels/%s/channels", id);
        r = ws_open(path, WS_HEADERS(AUTH));
        assert_int_equal(r.status, 101);
        resp_done(&r);
        /* A graceful restart: the socket is closed with 1001, and the connection goes. */
        http_server_retire(t.server);
        WAIT_UNTIL(ws_find(WSLAY_CONNECTION_CLOSE) != NULL);
        c = ws_find(WSLAY_CONNECTION_CLOSE);
        assert_int_equal(c->status, WEBSOCKET_CLOSE_GOING_AWAY);
        WAIT_UNTIL(http_server_n_connections(t.server) == 0);
}

/* MHD's connection timeout and our header deadline (1 s here) do not apply to an upgraded
 * connection: a WebSocket idle for longer still works. */
static int setup_short(void **state) {
        header_timeout_usec = 1 * USEC_PER_SEC;
        setup(state);
        header_timeout_usec = 30 * USEC_PER_SEC;
        return 0;
}

static void test_ws_outlives_header_timeout(void **state) {
        _cleanup_free_ char *id = create_kernel();
        char path[128];
        uint64_t until;
        Resp r;

        (void) snprintf(path, sizeof(path), "/api/kernels/%s/channels", id);
        r = ws_open(path, WS_HEADERS(AUTH));
        assert_int_equal(r.status, 101);
        resp_done(&r);
        /* Idle for 3 deadlines (a lower bound only: no upper bound is asserted). */
        until = now_usec(CLOCK_MONOTONIC) + 3 * USEC_PER_SEC;
        while (now_usec(CLOCK_MONOTONIC) < until)
                step();
        assert_null(ws_find(WSLAY_CONNECTION_CLOSE));
        assert_false(t.ws_eof);
        ws_send_text(execute_request("late"));
        WAIT_UNTIL(ws_count("late", "execute_reply") == 1);
        assert_int_equal(http_server_n_connections(t.server), 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_auth, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kernelspecs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lifecycle, setup, teardown),
                cmocka_unit_test_setup_teardown(test_create_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_other_routes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ws_execute, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ws_query_token_and_v1, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ws_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ws_kernel_deleted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ws_client_closes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ws_server_retires, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ws_outlives_header_timeout, setup_short, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
