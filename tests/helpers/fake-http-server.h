/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Tiny HTTP servers in a test's sd-event loop (fake-http-server.c), for the fleet's clients
 * (tests/integration/fleet-etcd.c, fleet-s3.c): each listens on a free loopback port, reads a
 * connection's request until it is whole (its headers and Content-Length bytes, or its buffer
 * full), keeps it, writes its canned answer and closes. An empty answer "" closes the connection
 * right after the request; for a port that refuses connections or one that never answers, bind a
 * fake_http_loopback_socket() and listen() on it or not. The servers live until
 * fake_http_servers_free(): nothing else takes their ports meanwhile. libc and sd-event only.
 */
#pragma once

#include <stddef.h>
#include <systemd/sd-event.h>

/* The request buffer of a connection when fake_http_server_new() is given 0: a request of this
 * size or more is answered after its first FAKE_HTTP_REQUEST_MAX_DEFAULT - 1 bytes. */
#define FAKE_HTTP_REQUEST_MAX_DEFAULT ((size_t) 8192)

typedef struct FakeHttpServer FakeHttpServer;

/* fake_http_loopback_socket() - a TCP socket bound to a free port of 127.0.0.1, not listening
 * (nonblocking, close-on-exec), its port in *@ret_port. Return: the fd, or -errno. */
int fake_http_loopback_socket(int *ret_port);

/*
 * fake_http_server_new() - a server in @event answering @answer (taken over, freed with the
 * server, even when this fails) to each request read into a buffer of @request_max bytes (0:
 * FAKE_HTTP_REQUEST_MAX_DEFAULT). Return: 0 with *@ret, or -errno (no loopback socket, no listen()).
 */
int fake_http_server_new(sd_event *event, char *answer, size_t request_max, FakeHttpServer **ret);

/* fake_http_server_capture() - from now on each request read is also written to
 * @dir/capture-NN.http, NN counting the server's requests from 00 (@dir stays the caller's; NULL: no
 * longer). */
void fake_http_server_capture(FakeHttpServer *server, const char *dir);

/* fake_http_write_file() - the @n bytes at @data into the file @path, as a capture is written (a
 * TAP comment when that fails). */
void fake_http_write_file(const char *path, const char *data, size_t n);

/* fake_http_server_port() - the loopback port it listens on. */
int fake_http_server_port(const FakeHttpServer *server);
/* fake_http_server_connections() - the connections it accepted. */
unsigned fake_http_server_connections(const FakeHttpServer *server);
/* fake_http_server_requests() - the requests it read to their end (or a full buffer) and answered. */
unsigned fake_http_server_requests(const FakeHttpServer *server);
/* fake_http_server_last_request() - the last of them, NUL-terminated; NULL before the first. */
const char *fake_http_server_last_request(const FakeHttpServer *server);

/* fake_http_url() - "http://127.0.0.1:@port" (malloc'ed; aborts when out of memory). */
char *fake_http_url(int port);

/* fake_http_servers_free() - every server made (their listening sockets closed). The connections
 * still open stay in their loop until it ends; it must not run afterwards. */
void fake_http_servers_free(void);
