/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libcurl's multi interface in an sd-event loop (curl-glue.h): sockets, the one timer, completions. */

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "fleet/curl-glue.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"

/* One socket libcurl asked us to watch; curl_multi_assign() links it to the socket. */
typedef struct CurlGlueSocket {
        CurlGlue *glue;
        curl_socket_t fd;
        sd_event_source *source;
        struct CurlGlueSocket *prev, *next;
} CurlGlueSocket;

struct CurlGlue {
        sd_event *event;
        CURLM *multi;
        sd_event_source *timer;
        CurlGlueSocket *sockets;
        CurlGlueRequest *requests;      /* started, not finished yet */
        bool global_init;
};

struct CurlGlueRequest {
        CurlGlue *glue;                 /* NULL once the glue is gone */
        CURL *easy;
        bool started;
        char *body;
        size_t body_size, body_allocated, max_body;
        bool too_big, oom;
        CurlGlueDone done;
        void *userdata;
        char error[CURL_ERROR_SIZE];
        CurlGlueRequest *prev, *next;
};

/* The link into a doubly linked list whose elements have prev and next; head is a pointer lvalue. */
#define GLUE_LIST_PREPEND(head, item)                                   \
        do {                                                            \
                (item)->prev = NULL;                                    \
                (item)->next = (head);                                  \
                if (head)                                               \
                        (head)->prev = (item);                          \
                (head) = (item);                                        \
        } while (0)
#define GLUE_LIST_REMOVE(head, item)                                    \
        do {                                                            \
                if ((item)->next)                                       \
                        (item)->next->prev = (item)->prev;              \
                if ((item)->prev)                                       \
                        (item)->prev->next = (item)->next;              \
                else if ((head) == (item))                              \
                        (head) = (item)->next;                          \
                (item)->prev = (item)->next = NULL;                     \
        } while (0)

static const struct {
        CURLcode code;
        int error;
} curl_errors[] = {
        { CURLE_COULDNT_RESOLVE_HOST,       EHOSTUNREACH },
        { CURLE_COULDNT_RESOLVE_PROXY,      EHOSTUNREACH },
        { CURLE_OPERATION_TIMEDOUT,         ETIMEDOUT },
        { CURLE_GOT_NOTHING,                ECONNRESET },
        { CURLE_SEND_ERROR,                 ECONNRESET },
        { CURLE_RECV_ERROR,                 ECONNRESET },
        { CURLE_PARTIAL_FILE,               EPROTO },
        { CURLE_WEIRD_SERVER_REPLY,         EPROTO },
        { CURLE_UNSUPPORTED_PROTOCOL,       EPROTO },   /* an HTTP/0.9 answer: not HTTP at all */
        { CURLE_BAD_CONTENT_ENCODING,       EPROTO },
        { CURLE_HTTP2,                      EPROTO },
        { CURLE_HTTP2_STREAM,               EPROTO },
        { CURLE_TOO_MANY_REDIRECTS,         EPROTO },
        { CURLE_PEER_FAILED_VERIFICATION,   EACCES },
        { CURLE_SSL_PINNEDPUBKEYNOTMATCH,   EACCES },
        { CURLE_SSL_INVALIDCERTSTATUS,      EACCES },
        { CURLE_SSL_ISSUER_ERROR,           EACCES },
        { CURLE_SSL_CONNECT_ERROR,          ECONNABORTED },
        { CURLE_SSL_CERTPROBLEM,            EINVAL },
        { CURLE_SSL_CACERT_BADFILE,         EINVAL },
        { CURLE_SSL_CRL_BADFILE,            EINVAL },
        { CURLE_SSL_CIPHER,                 EINVAL },
        { CURLE_URL_MALFORMAT,              EINVAL },
        { CURLE_OUT_OF_MEMORY,              ENOMEM },
        { CURLE_ABORTED_BY_CALLBACK,        ECANCELED },
};

int curl_glue_errno(CURLcode code, long os_errno) {
        if (code == CURLE_OK)
                return 0;
        if (code == CURLE_COULDNT_CONNECT) {
                /* connect()'s own errno says which: refused, no route, a network down */
                static const int connect_errors[] = {
                        ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, ENETDOWN, EADDRNOTAVAIL, ETIMEDOUT, ECONNRESET,
                };

                for (size_t i = 0; i < ELEMENTSOF(connect_errors); i++)
                        if (os_errno == connect_errors[i])
                                return -connect_errors[i];
                return -ECONNREFUSED;
        }
        for (size_t i = 0; i < ELEMENTSOF(curl_errors); i++)
                if (curl_errors[i].code == code)
                        return -curl_errors[i].error;
        return -EIO;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata) {
        CurlGlueRequest *req = userdata;
        size_t n = size * nmemb, need;

        if (n > req->max_body - req->body_size) {
                req->too_big = true;
                return 0;                       /* libcurl ends the transfer: CURLE_WRITE_ERROR */
        }
        need = req->body_size + n + 1;
        if (need > req->body_allocated) {
                size_t doubled = MIN(req->body_allocated * 2, req->max_body + 1);
                size_t a = MAX(need, doubled);
                char *p;

                a = MAX(a, (size_t) 1024);
                p = realloc(req->body, a);
                if (!p) {
                        req->oom = true;
                        return 0;
                }
                req->body = p;
                req->body_allocated = a;
        }
        memcpy(req->body + req->body_size, data, n);
        req->body_size += n;
        req->body[req->body_size] = '\0';
        return n;
}

/* Every request that ended: out of the multi handle, then its callback (which owns it from then on). */
static void glue_dispatch(CurlGlue *g) {
        CURLMsg *msg;
        int left;

        while ((msg = curl_multi_info_read(g->multi, &left))) {
                CurlGlueRequest *req = NULL;
                long status = 0, os_errno = 0;
                int error;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &req) != CURLE_OK || !req)
                        continue;

                (void) curl_easy_getinfo(req->easy, CURLINFO_OS_ERRNO, &os_errno);
                error = req->too_big ? -E2BIG : req->oom ? -ENOMEM : curl_glue_errno(msg->data.result, os_errno);
                if (error == 0)
                        (void) curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
                if (req->too_big)       /* rather than libcurl's "Failure writing output" */
                        (void) snprintf(req->error, sizeof(req->error), "Answer over the cap of %zu bytes",
                                        req->max_body);
                else if (error < 0 && req->error[0] == '\0')
                        (void) snprintf(req->error, sizeof(req->error), "%s", curl_easy_strerror(msg->data.result));

                /* msg is invalid once the handle is removed */
                (void) curl_multi_remove_handle(g->multi, req->easy);
                req->started = false;
                GLUE_LIST_REMOVE(g->requests, req);

                req->done(req, error, status, req->body ?: "", req->body_size, req->userdata);
        }
}

static void glue_socket_action(CurlGlue *g, curl_socket_t fd, int action) {
        CURLMcode mc;
        int running;

        mc = curl_multi_socket_action(g->multi, fd, action, &running);
        if (mc != CURLM_OK)
                log_debug("curl_multi_socket_action() failed, ignoring: %s", curl_multi_strerror(mc));
        glue_dispatch(g);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        CurlGlue *g = userdata;
        int action = 0;

        if (revents & (EPOLLIN | EPOLLPRI))
                action |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                action |= CURL_CSELECT_OUT;
        if (revents & (EPOLLERR | EPOLLHUP))
                action |= CURL_CSELECT_ERR;

        glue_socket_action(g, fd, action);
        return 0;                       /* < 0 would disable the source for good */
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        glue_socket_action(userdata, CURL_SOCKET_TIMEOUT, 0);
        return 0;
}

static CurlGlueSocket *glue_socket_free(CurlGlueSocket *gs) {
        if (!gs)
                return NULL;
        GLUE_LIST_REMOVE(gs->glue->sockets, gs);
        (void) sd_event_source_disable_unref(gs->source);
        free(gs);
        return NULL;
}

/* CURLMOPT_SOCKETFUNCTION: watch @fd for @what, or stop watching it. */
static int on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userdata, void *socketp) {
        CurlGlue *g = userdata;
        CurlGlueSocket *gs = socketp;
        uint32_t events;
        int r;

        if (what == CURL_POLL_REMOVE) {
                (void) curl_multi_assign(g->multi, fd, NULL);
                (void) glue_socket_free(gs);
                return 0;
        }

        events = (what == CURL_POLL_IN ? EPOLLIN : what == CURL_POLL_OUT ? EPOLLOUT : EPOLLIN | EPOLLOUT);
        if (gs) {
                r = sd_event_source_set_io_events(gs->source, events);
                if (r < 0) {
                        log_debug_errno(r, "Failed to change the events of curl socket %i: %m", fd);
                        return -1;
                }
                return 0;
        }

        gs = calloc(1, sizeof(*gs));
        if (!gs)
                return -1;
        *gs = (CurlGlueSocket) { .glue = g, .fd = fd };
        GLUE_LIST_PREPEND(g->sockets, gs);

        r = sd_event_add_io(g->event, &gs->source, fd, events, on_io, g);
        if (r < 0) {
                (void) glue_socket_free(gs);
                log_debug_errno(r, "Failed to watch curl socket %i: %m", fd);
                return -1;
        }
        (void) sd_event_source_set_description(gs->source, "curl-io");

        if (curl_multi_assign(g->multi, fd, gs) != CURLM_OK) {
                (void) glue_socket_free(gs);
                return -1;
        }
        return 0;
}

/* CURLMOPT_TIMERFUNCTION: (re)arm or stop the one timer; libcurl must not be called from here. */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userdata) {
        CurlGlue *g = userdata;
        uint64_t when;
        int r;

        if (timeout_ms < 0) {
                if (g->timer)
                        (void) sd_event_source_set_enabled(g->timer, SD_EVENT_OFF);
                return 0;
        }

        when = now_usec(CLOCK_MONOTONIC) + (uint64_t) timeout_ms * USEC_PER_MSEC;
        if (g->timer) {
                r = sd_event_source_set_time(g->timer, when);
                if (r >= 0)
                        r = sd_event_source_set_enabled(g->timer, SD_EVENT_ONESHOT);
        } else {
                r = sd_event_add_time(g->event, &g->timer, CLOCK_MONOTONIC, when, 1, on_timer, g);
                if (r >= 0)
                        (void) sd_event_source_set_description(g->timer, "curl-timer");
        }
        if (r < 0) {
                log_debug_errno(r, "Failed to arm the curl timer: %m");
                return -1;
        }
        return 0;
}

int curl_glue_new(sd_event *event, CurlGlue **ret) {
        _cleanup_(curl_glue_freep) CurlGlue *g = NULL;

        assert(event);
        assert(ret);

        g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        g->event = sd_event_ref(event);

        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return -EIO;
        g->global_init = true;

        g->multi = curl_multi_init();
        if (!g->multi)
                return -ENOMEM;
        if (curl_multi_setopt(g->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK ||
            curl_multi_setopt(g->multi, CURLMOPT_SOCKETDATA, g) != CURLM_OK ||
            curl_multi_setopt(g->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK ||
            curl_multi_setopt(g->multi, CURLMOPT_TIMERDATA, g) != CURLM_OK)
                return -EIO;

        *ret = STEAL(g);
        return 0;
}

CurlGlue *curl_glue_free(CurlGlue *g) {
        if (!g)
                return NULL;

        while (g->requests) {
                CurlGlueRequest *req = g->requests;

                (void) curl_multi_remove_handle(g->multi, req->easy);
                req->started = false;
                req->glue = NULL;
                GLUE_LIST_REMOVE(g->requests, req);
        }
        if (g->multi)
                (void) curl_multi_cleanup(g->multi);    /* may still call on_curl_socket() */
        while (g->sockets)
                (void) glue_socket_free(g->sockets);
        (void) sd_event_source_disable_unref(g->timer);
        sd_event_unref(g->event);
        if (g->global_init)
                curl_global_cleanup();
        free(g);
        return NULL;
}

static CURLcode request_setup(CurlGlueRequest *req, const char *url) {
        CURL *e = req->easy;
        CURLcode code;

        code = curl_easy_setopt(e, CURLOPT_URL, url);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_PRIVATE, (char *) req);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_ERRORBUFFER, req->error);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        if (code == CURLE_OK)                   /* never http_proxy= from the environment */
                code = curl_easy_setopt(e, CURLOPT_PROXY, "");
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500             /* 7.85: CURLOPT_PROTOCOLS deprecated */
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_WRITEDATA, req);
        return code;
}

int curl_glue_request_new(CurlGlue *g, const char *url, size_t max_body, CurlGlueRequest **ret) {
        _cleanup_(curl_glue_request_freep) CurlGlueRequest *req = NULL;

        assert(g);
        assert(url);
        assert(ret);

        req = calloc(1, sizeof(*req));
        if (!req)
                return -ENOMEM;
        req->glue = g;
        req->max_body = MIN(max_body, SIZE_MAX - 1);

        req->easy = curl_easy_init();
        if (!req->easy)
                return -ENOMEM;
        if (request_setup(req, url) != CURLE_OK)
                return -EIO;

        *ret = STEAL(req);
        return 0;
}

CurlGlueRequest *curl_glue_request_free(CurlGlueRequest *req) {
        if (!req)
                return NULL;

        if (req->started && req->glue) {
                (void) curl_multi_remove_handle(req->glue->multi, req->easy);
                GLUE_LIST_REMOVE(req->glue->requests, req);
        }
        if (req->easy)
                curl_easy_cleanup(req->easy);
        free(req->body);
        free(req);
        return NULL;
}

CURL *curl_glue_request_easy(CurlGlueRequest *req) {
        assert(req);
        return req->easy;
}

const char *curl_glue_request_message(CurlGlueRequest *req) {
        assert(req);
        return req->error;
}

int curl_glue_request_start(CurlGlueRequest *req, CurlGlueDone done, void *userdata) {
        CURLMcode mc;

        assert(req);
        assert(done);

        if (!req->glue)
                return -ESHUTDOWN;
        if (req->started || req->done)
                return -EBUSY;

        /* curl_multi_add_handle() arms the timer at once; the transfer starts from the loop */
        mc = curl_multi_add_handle(req->glue->multi, req->easy);
        if (mc != CURLM_OK)
                return log_debug_errno(EIO, "curl_multi_add_handle() failed: %s", curl_multi_strerror(mc));
        req->done = done;
        req->userdata = userdata;
        req->started = true;
        GLUE_LIST_PREPEND(req->glue->requests, req);
        return 0;
}
