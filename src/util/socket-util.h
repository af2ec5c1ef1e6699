/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Parsing and formatting of listen addresses (IPv4, IPv6, AF_UNIX paths). */
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

typedef union SockaddrUnion {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
        struct sockaddr_un un;
        struct sockaddr_storage storage;
} SockaddrUnion;

typedef struct ListenAddress {
        SockaddrUnion addr;
        socklen_t len;
} ListenAddress;

/*
 * listen_address_parse() - parse "127.0.0.1:4311", "[::1]:4311" or "/abs/path.sock".
 * Ports must be 1–65535 written in plain decimal. Return: 0, or -EINVAL.
 */
int listen_address_parse(const char *s, ListenAddress *ret);

/* sockaddr_format() - "1.2.3.4:80", "[::1]:80" or "unix:PATH" (for logs), into buf. Return: buf. */
const char *sockaddr_format(const struct sockaddr *sa, socklen_t len, char *buf, size_t size);
