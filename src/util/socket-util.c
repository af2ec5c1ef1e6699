/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Parsing and formatting of listen addresses (IPv4, IPv6, AF_UNIX paths). */

#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "util/macro.h"
#include "util/socket-util.h"

static int parse_port(const char *s, uint16_t *ret) {
        unsigned long v = 0;

        if (isempty(s) || strlen(s) > 5)
                return -EINVAL;
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned long) (*p - '0');
        }
        if (s[0] == '0' || v == 0 || v > 65535)
                return -EINVAL;
        *ret = (uint16_t) v;
        return 0;
}

/* "HOST" (@host_len bytes of @host) and "PORT" of an address of @family. */
static int listen_address_inet(int family, const char *host, size_t host_len, const char *port_s,
                               ListenAddress *ret) {
        char buf[INET6_ADDRSTRLEN];
        ListenAddress a = {};
        uint16_t port;
        void *addr;

        if (host_len >= (family == AF_INET6 ? INET6_ADDRSTRLEN : INET_ADDRSTRLEN))
                return -EINVAL;
        memcpy(buf, host, host_len);
        buf[host_len] = '\0';
        if (parse_port(port_s, &port) < 0)
                return -EINVAL;
        if (family == AF_INET6) {
                a.addr.in6.sin6_family = AF_INET6;
                a.addr.in6.sin6_port = htons(port);
                a.len = sizeof(a.addr.in6);
                addr = &a.addr.in6.sin6_addr;
        } else {
                a.addr.in.sin_family = AF_INET;
                a.addr.in.sin_port = htons(port);
                a.len = sizeof(a.addr.in);
                addr = &a.addr.in.sin_addr;
        }
        /* inet_pton() accepts only the dotted-quad form, unlike inet_aton(). */
        if (inet_pton(family, buf, addr) != 1)
                return -EINVAL;
        *ret = a;
        return 0;
}

int listen_address_parse(const char *s, ListenAddress *ret) {
        const char *sep;

        if (isempty(s))
                return -EINVAL;

        if (s[0] == '/') {
                ListenAddress a = {};
                size_t l = strlen(s);

                if (l >= sizeof(a.addr.un.sun_path))
                        return -EINVAL;
                a.addr.un.sun_family = AF_UNIX;
                memcpy(a.addr.un.sun_path, s, l + 1);
                a.len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + l + 1);
                *ret = a;
                return 0;
        }

        if (s[0] == '[') {
                sep = strchr(s, ']');
                if (!sep || sep[1] != ':')
                        return -EINVAL;
                return listen_address_inet(AF_INET6, s + 1, (size_t) (sep - s - 1), sep + 2, ret);
        }

        sep = strrchr(s, ':');
        if (!sep)
                return -EINVAL;
        return listen_address_inet(AF_INET, s, (size_t) (sep - s), sep + 1, ret);
}

const char *sockaddr_format(const struct sockaddr *sa, socklen_t len, char *buf, size_t size) {
        char host[INET6_ADDRSTRLEN];

        if (!sa || len < sizeof(sa_family_t)) {
                (void) snprintf(buf, size, "(unknown)");
                return buf;
        }
        switch (sa->sa_family) {
        case AF_INET: {
                const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
                (void) inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
                (void) snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
                break;
        }
        case AF_INET6: {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
                (void) inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
                (void) snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
                break;
        }
        case AF_UNIX: {
                const struct sockaddr_un *un = (const struct sockaddr_un *) sa;
                size_t n = len > offsetof(struct sockaddr_un, sun_path) ?
                        len - offsetof(struct sockaddr_un, sun_path) : 0;
                if (n == 0 || un->sun_path[0] == '\0')
                        (void) snprintf(buf, size, "unix:(unnamed)");
                else
                        (void) snprintf(buf, size, "unix:%.*s", (int) strnlen(un->sun_path, n), un->sun_path);
                break;
        }
        default:
                (void) snprintf(buf, size, "(family %i)", sa->sa_family);
        }
        return buf;
}
