/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tiny HTTP servers in a test's sd-event loop (fake-http-server.h). */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake-http-server.h"

struct FakeHttpServer {
        sd_event *event;
        int port;
        char *answer;
        size_t answer_size;
        size_t request_max;             /* a connection's buffer, its NUL included */
        unsigned connections;
        unsigned requests;
        const char *capture_dir;
        char *last;                     /* the last request, NUL-terminated */
        sd_event_source *source;
        FakeHttpServer *next;
};

static FakeHttpServer *fake_servers;

typedef struct FakeConnection {
        FakeHttpServer *server;
        size_t got, sent;
        bool answering;
        char request[];                 /* server->request_max bytes */
} FakeConnection;

int fake_http_loopback_socket(int *ret_port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        int fd;

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            getsockname(fd, (struct sockaddr *) &sa, &len) < 0) {
                int r = -errno;

                (void) close(fd);
                return r;
        }
        *ret_port = ntohs(sa.sin_port);
        return fd;
}

char *fake_http_url(int port) {
        char *s;

        if (asprintf(&s, "http://127.0.0.1:%i", port) < 0)
                abort();
        return s;
}

/* The whole request read (headers and Content-Length bytes)? */
static bool request_complete(const FakeConnection *conn) {
        const char *end = memmem(conn->request, conn->got, "\r\n\r\n", 4), *cl;
        size_t header = end ? (size_t) (end - conn->request) + 4 : 0;
        unsigned long length = 0;

        if (!end)
                return false;
        cl = memmem(conn->request, header, "Content-Length:", 15);
        if (cl)
                length = strtoul(cl + 15, NULL, 10);
        return conn->got >= header + length;
}

void fake_http_write_file(const char *path, const char *data, size_t n) {
        FILE *f = fopen(path, "we");

        if (!f || fwrite(data, 1, n, f) != n)
                printf("# failed to write %s: %m\n", path);
        if (f)
                (void) fclose(f);
}

/* The request read: the server's last one, and a file of its capture directory when it has one. */
static void connection_keep(FakeConnection *conn) {
        FakeHttpServer *server = conn->server;
        char path[4096];

        free(server->last);
        server->last = malloc(conn->got + 1);
        if (!server->last)
                abort();
        memcpy(server->last, conn->request, conn->got);
        server->last[conn->got] = '\0';
        (void) snprintf(path, sizeof(path), "%s/capture-%02u.http", server->capture_dir ?: "", server->requests++);
        if (server->capture_dir)
                fake_http_write_file(path, conn->request, conn->got);
}

/* Its source owns the fd and, through its destroy callback, the FakeConnection. */
static int on_connection_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        FakeConnection *conn = userdata;
        FakeHttpServer *server = conn->server;
        ssize_t n;

        if (!conn->answering) {
                n = recv(fd, conn->request + conn->got, server->request_max - 1 - conn->got, 0);
                if (n < 0 && errno == EAGAIN)
                        return 0;
                if (n <= 0) {
                        (void) sd_event_source_disable_unref(s);
                        return 0;
                }
                conn->got += n;
                if (!request_complete(conn) && conn->got < server->request_max - 1)
                        return 0;
                connection_keep(conn);
                conn->answering = true;
                (void) sd_event_source_set_io_events(s, EPOLLOUT);
                return 0;
        }

        n = send(fd, server->answer + conn->sent, server->answer_size - conn->sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EAGAIN)
                return 0;
        if (n > 0)
                conn->sent += n;
        if (n <= 0 || conn->sent == server->answer_size)
                (void) sd_event_source_disable_unref(s);        /* the answer ends with the connection */
        return 0;
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        FakeHttpServer *server = userdata;
        sd_event_source *cs = NULL;
        FakeConnection *conn;
        int cfd;

        cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0)
                return 0;
        conn = calloc(1, sizeof(*conn) + server->request_max);
        if (!conn || sd_event_add_io(server->event, &cs, cfd, EPOLLIN, on_connection_io, conn) < 0) {
                free(conn);
                (void) close(cfd);
                return 0;
        }
        (void) sd_event_source_set_io_fd_own(cs, true);
        (void) sd_event_source_set_destroy_callback(cs, free);
        (void) sd_event_source_set_floating(cs, true);   /* the loop's until it ends */
        sd_event_source_unref(cs);
        conn->server = server;
        server->connections++;
        return 0;
}

static void server_free(FakeHttpServer *server) {
        (void) sd_event_source_disable_unref(server->source);
        sd_event_unref(server->event);
        free(server->answer);
        free(server->last);
        free(server);
}

int fake_http_server_new(sd_event *event, char *answer, size_t request_max, FakeHttpServer **ret) {
        FakeHttpServer *server;
        int fd, r;

        server = calloc(1, sizeof(*server));
        if (!server) {
                free(answer);
                return -ENOMEM;
        }
        server->event = sd_event_ref(event);
        server->answer = answer;
        server->answer_size = strlen(answer);
        server->request_max = request_max > 1 ? request_max : FAKE_HTTP_REQUEST_MAX_DEFAULT;

        fd = fake_http_loopback_socket(&server->port);
        if (fd < 0) {
                server_free(server);
                return fd;
        }
        if (listen(fd, 16) < 0) {
                r = -errno;
                (void) close(fd);
                server_free(server);
                return r;
        }
        r = sd_event_add_io(event, &server->source, fd, EPOLLIN, on_accept, server);
        if (r < 0) {
                (void) close(fd);
                server_free(server);
                return r;
        }
        (void) sd_event_source_set_io_fd_own(server->source, true);
        server->next = fake_servers;
        fake_servers = server;
        *ret = server;
        return 0;
}

void fake_http_server_capture(FakeHttpServer *server, const char *dir) {
        server->capture_dir = dir;
}

int fake_http_server_port(const FakeHttpServer *server) {
        return server->port;
}

unsigned fake_http_server_connections(const FakeHttpServer *server) {
        return server->connections;
}

unsigned fake_http_server_requests(const FakeHttpServer *server) {
        return server->requests;
}

const char *fake_http_server_last_request(const FakeHttpServer *server) {
        return server->last;
}

void fake_http_servers_free(void) {
        while (fake_servers) {
                FakeHttpServer *server = fake_servers;

                fake_servers = server->next;
                server_free(server);
        }
}
