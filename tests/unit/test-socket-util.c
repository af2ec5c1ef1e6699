/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/util/socket-util.h: listen address parsing and sockaddr formatting. */

#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/socket-util.h"

static void assert_round_trip(const char *in, int family, unsigned port, const char *expected_format) {
        ListenAddress a, b;
        char buf[256];

        memset(&a, 0xaa, sizeof(a));
        assert_int_equal(listen_address_parse(in, &a), 0);
        assert_int_equal(a.addr.sa.sa_family, family);
        switch (family) {
        case AF_INET:
                assert_int_equal(a.len, sizeof(struct sockaddr_in));
                assert_int_equal(ntohs(a.addr.in.sin_port), port);
                break;
        case AF_INET6:
                assert_int_equal(a.len, sizeof(struct sockaddr_in6));
                assert_int_equal(ntohs(a.addr.in6.sin6_port), port);
                break;
        default:
                fail_msg("unexpected family %d", family);
        }
        assert_ptr_equal(sockaddr_format(&a.addr.sa, a.len, buf, sizeof(buf)), buf);
        assert_string_equal(buf, expected_format);

        /* And the formatted form parses back to the same address. */
        assert_int_equal(listen_address_parse(buf, &b), 0);
        assert_int_equal(b.len, a.len);
        assert_memory_equal(&b.addr, &a.addr, a.len);
}

static void test_parse_ipv4(void **state) {
        ListenAddress a;

        assert_round_trip("127.0.0.1:4311", AF_INET, 4311, "127.0.0.1:4311");
        assert_round_trip("0.0.0.0:1", AF_INET, 1, "0.0.0.0:1");
        assert_round_trip("255.255.255.255:65535", AF_INET, 65535, "255.255.255.255:65535");
        assert_round_trip("10.1.2.3:80", AF_INET, 80, "10.1.2.3:80");

        assert_int_equal(listen_address_parse("192.168.7.9:8080", &a), 0);
        assert_int_equal(ntohl(a.addr.in.sin_addr.s_addr), 0xc0a80709u);
}

static void test_parse_ipv6(void **state) {
        ListenAddress a;
        struct in6_addr loopback = IN6ADDR_LOOPBACK_INIT;

        assert_round_trip("[::1]:80", AF_INET6, 80, "[::1]:80");
        assert_round_trip("[::]:4311", AF_INET6, 4311, "[::]:4311");
        assert_round_trip("[fe80::1:2]:65535", AF_INET6, 65535, "[fe80::1:2]:65535");
        /* Non-canonical spellings are formatted canonically and parse back identically. */
        assert_round_trip("[0:0:0:0:0:0:0:1]:80", AF_INET6, 80, "[::1]:80");
        assert_round_trip("[::ffff:1.2.3.4]:1", AF_INET6, 1, "[::ffff:1.2.3.4]:1");
        assert_round_trip("[2001:DB8::A]:443", AF_INET6, 443, "[2001:db8::a]:443");

        assert_int_equal(listen_address_parse("[::1]:80", &a), 0);
        assert_memory_equal(&a.addr.in6.sin6_addr, &loopback, sizeof(loopback));
}

static void test_parse_unix(void **state) {
        ListenAddress a;
        char buf[256], path[200];

        assert_int_equal(listen_address_parse("/run/sandbox-runner/api.sock", &a), 0);
        assert_int_equal(a.addr.sa.sa_family, AF_UNIX);
        assert_string_equal(a.addr.un.sun_path, "/run/sandbox-runner/api.sock");
        assert_int_equal(a.len, offsetof(struct sockaddr_un, sun_path) + strlen("/run/sandbox-runner/api.sock") + 1);

        /* The longest path that fits sun_path with its NUL (107 bytes + NUL) is accepted. */
        memset(path, 'a', sizeof(path));
        path[0] = '/';
        path[sizeof(a.addr.un.sun_path) - 1] = '\0';
        assert_int_equal(listen_address_parse(path, &a), 0);
        assert_int_equal(strlen(a.addr.un.sun_path), sizeof(a.addr.un.sun_path) - 1);
        assert_int_equal(a.len, sizeof(struct sockaddr_un));
        /* One more byte does not fit. */
        path[sizeof(a.addr.un.sun_path) - 1] = 'a';
        path[sizeof(a.addr.un.sun_path)] = '\0';
        assert_int_equal(listen_address_parse(path, &a), -EINVAL);

        /* sockaddr_format() truncates safely into a short buffer. */
        assert_int_equal(listen_address_parse("/run/x.sock", &a), 0);
        sockaddr_format(&a.addr.sa, a.len, buf, 4);
        assert_int_equal(strlen(buf), 3);
}

static void test_format_unix_round_trip(void **state) {
        /*
         * socket-util.h: sockaddr_format() gives "unix:PATH" for AF_UNIX (a log form); the path
         * after the prefix is what listen_address_parse() takes back.
         */
        ListenAddress a, b;
        char buf[256];

        assert_int_equal(listen_address_parse("/run/sandbox-runner/api.sock", &a), 0);
        sockaddr_format(&a.addr.sa, a.len, buf, sizeof(buf));
        assert_string_equal(buf, "unix:/run/sandbox-runner/api.sock");
        assert_int_equal(listen_address_parse(buf + 5, &b), 0);
        assert_memory_equal(&b.addr, &a.addr, a.len);
        assert_int_equal(listen_address_parse(buf, &b), -EINVAL);
}

static void test_format_truncation(void **state) {
        ListenAddress a;
        char buf[8];

        assert_int_equal(listen_address_parse("127.0.0.1:4311", &a), 0);
        assert_ptr_equal(sockaddr_format(&a.addr.sa, a.len, buf, sizeof(buf)), buf);
        assert_string_equal(buf, "127.0.0");
}

static void test_parse_bad(void **state) {
        static const char *const bad[] = {
                "",
                /* ports */
                "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:99999", "127.0.0.1:655350",
                "127.0.0.1:+80", "127.0.0.1:-80", "127.0.0.1:080", "127.0.0.1: 80", "127.0.0.1:80 ",
                "127.0.0.1:8x", "127.0.0.1:0x50", "127.0.0.1:", "127.0.0.1", "127.0.0.1:80:80",
                /* IPv4 hosts: dotted quad only */
                "127.1:80", "1.2.3:80", "1.2.3.4.5:80", "256.0.0.1:80", "0x7f.0.0.1:80", "01.2.3.4:80",
                "localhost:80", ":80", " 127.0.0.1:80",
                /* IPv6 */
                "[::1]", "[::1]:", "[::1]80", "[::1]:0", "[::1]:65536", "[::1]:+80", "[::1]x:80",
                "[::1:80", "::1:80", "[]:80", "[127.0.0.1]:80", "[::g]:80", "[::1]:80x",
                /* unix sockets need an absolute path */
                "relative.sock", "./api.sock", "run/api.sock", "~/api.sock",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ListenAddress a, untouched;

                memset(&a, 0x5a, sizeof(a));
                memcpy(&untouched, &a, sizeof(a));
                if (listen_address_parse(bad[i], &a) != -EINVAL)
                        fail_msg("listen_address_parse(\"%s\") was accepted", bad[i]);
                /* Outputs are written only on success. */
                assert_memory_equal(&a, &untouched, sizeof(a));
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_ipv4),
                cmocka_unit_test(test_parse_ipv6),
                cmocka_unit_test(test_parse_unix),
                cmocka_unit_test(test_format_unix_round_trip),
                cmocka_unit_test(test_format_truncation),
                cmocka_unit_test(test_parse_bad),
        };

        return cmocka_run_group_tests_name("socket-util", tests, NULL, NULL);
}
