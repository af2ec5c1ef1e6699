/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/config/config.h: defaults, the INI parser's error paths, every key, drop-in loading. */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <cmocka.h>

#include "build-config.h"
#include "config/config.h"
#include "util/macro.h"

#define USEC 1000000ULL
#define MIB (1024 * 1024)

/* ---- helpers ------------------------------------------------------------------------------- */

static int setup_config(void **state) {
        Config *c = calloc(1, sizeof(Config));

        if (!c || config_init(c) < 0) {
                free(c);
                return -1;
        }
        *state = c;
        return 0;
}

static int teardown_config(void **state) {
        Config *c = *state;

        config_done(c);
        free(c);
        return 0;
}

static int parse_as(Config *c, const char *filename, const char *text, char **ret_error) {
        return config_parse_buffer(c, filename, text, strlen(text), ret_error);
}

static void assert_parse_ok(Config *c, const char *text) {
        char *error = NULL;
        int r;

        r = parse_as(c, "test.conf", text, &error);
        if (r != 0)
                fail_msg("config_parse_buffer() = %d (%s) for:\n%s", r, error ?: "no message", text);
        assert_null(error);
}

static size_t strv_len(char **l) {
        size_t n = 0;

        while (l && l[n])
                n++;
        return n;
}

/*
 * Parse @size bytes of @data into a fresh Config and check the failure: -EINVAL, an error string
 * starting with exactly "test.conf:LINE: " followed by a non-empty explanation containing
 * @substring, and a Config left exactly as it was.
 */
static void assert_parse_fails_n(const char *data, size_t size, unsigned line, const char *substring) {
        Config c, before;
        char *error = NULL, prefix[64];
        int r;

        assert_int_equal(config_init(&c), 0);
        memcpy(&before, &c, sizeof(c));

        r = config_parse_buffer(&c, "test.conf", data, size, &error);
        if (r != -EINVAL)
                fail_msg("config_parse_buffer() = %d, expected -EINVAL, for:\n%.200s", r, data);
        assert_non_null(error);
        (void) snprintf(prefix, sizeof(prefix), "test.conf:%u: ", line);
        if (strncmp(error, prefix, strlen(prefix)) != 0)
                fail_msg("error '%s' does not start with '%s'", error, prefix);
        assert_true(strlen(error) > strlen(prefix));
        if (substring && !strstr(error, substring))
                fail_msg("error '%s' does not mention '%s'", error, substring);
        /* A refused value does not change anything. */
        assert_memory_equal(&c, &before, sizeof(c));

        free(error);
        config_done(&c);
}

static void assert_parse_fails(const char *text, unsigned line, const char *substring) {
        assert_parse_fails_n(text, strlen(text), line, substring);
}

/* ---- defaults ------------------------------------------------------------------------------ */

static void test_defaults(void **state) {
        Config *c = *state;

        assert_int_equal(strv_len(c->listen), 1);
        assert_string_equal(c->listen[0], "127.0.0.1:4311");
        assert_int_equal(c->log_level, LOG_INFO);
        assert_true(c->max_connections > 0);
        assert_true(c->max_connections_per_client > 0);
        assert_true(c->max_connections_per_client <= c->max_connections);
        assert_true(c->header_timeout_usec > 0);
        assert_true(c->request_timeout_usec > 0);
        assert_true(c->max_request_body_bytes > 0);
        assert_null(c->token_file);
        assert_null(c->signing_key_file);
        /* API.md: SignatureMaxSkewSec defaults to 300. */
        assert_int_equal(c->signature_max_skew_usec, 300 * USEC);
        assert_non_null(c->bwrap);
        assert_int_equal(c->bwrap[0], '/');
        assert_false(c->allow_unscoped);
        assert_true(c->default_timeout_usec > 0);
        assert_true(c->default_timeout_usec <= c->max_timeout_usec);
        assert_int_equal(c->network_mode, NETWORK_MODE_NONE);
        assert_null(c->network_allow);
        assert_null(c->network_mirrors);
        assert_false(c->npu_enable);
        /* DESIGN.md §14: the base python environment is built after start-up unless told not to. */
        assert_non_null(c->env_bootstrap);
        assert_string_equal(c->env_bootstrap[0], "python-base");
        assert_null(c->env_bootstrap[1]);
        assert_false(c->env_offline);
        assert_null(c->env_micromamba);
        assert_int_equal(c->env_setup_timeout_usec, 1800 * USEC);
        assert_null(c->env_python_base);
        assert_string_equal(c->env_python_base_packages[3], "matplotlib");
        assert_null(c->env_python_base_packages[4]);
}

static void test_network_mode_strings(void **state) {
        assert_string_equal(network_mode_to_string(NETWORK_MODE_NONE), "none");
        assert_string_equal(network_mode_to_string(NETWORK_MODE_ALLOWLIST), "allowlist");
        assert_null(network_mode_to_string(_NETWORK_MODE_MAX));
        assert_null(network_mode_to_string(_NETWORK_MODE_INVALID));
        assert_int_equal(network_mode_from_string("none"), NETWORK_MODE_NONE);
        assert_int_equal(network_mode_from_string("allowlist"), NETWORK_MODE_ALLOWLIST);
        assert_int_equal(network_mode_from_string("None"), _NETWORK_MODE_INVALID);
        assert_int_equal(network_mode_from_string(""), _NETWORK_MODE_INVALID);
        assert_int_equal(network_mode_from_string("open"), _NETWORK_MODE_INVALID);
}

/* ---- value parsers ------------------------------------------------------------------------- */

static void test_parse_bytes(void **state) {
        static const struct { const char *s; uint64_t v; } good[] = {
                { "0", 0 },
                { "1", 1 },
                { "1B", 1 },
                { "1K", 1024 },
                { "1KiB", 1024 },
                { "2M", 2ULL << 20 },
                { "2MiB", 2ULL << 20 },
                { "3G", 3ULL << 30 },
                { "3GiB", 3ULL << 30 },
                { "4T", 4ULL << 40 },
                { "4TiB", 4ULL << 40 },
                { "1536K", 1536ULL * 1024 },
                { "infinity", 0 },
                { "18446744073709551615", UINT64_MAX },
                { "16777215T", 16777215ULL << 40 },
                { "17179869183G", 17179869183ULL << 30 },
                { "17592186044415M", 17592186044415ULL << 20 },
                { "18014398509481983K", 18014398509481983ULL << 10 },
        };
        static const char *const bad[] = {
                "", " ", "1k", "1kB", "1KB", "1 K", " 1", "1 ", "-1", "+1", "1.5G", "K", "1X", "1P", "1E",
                "0x10", "1e3", "1KK", "1BK", "Infinity", "infinity1", "inf",
                "18446744073709551616", "99999999999999999999999",  /* overflow before the suffix */
                "16777216T", "17179869184G", "17592186044416M", "18014398509481984K",  /* overflow with it */
        };

        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                uint64_t v = 42;

                if (config_parse_bytes(good[i].s, &v) != 0)
                        fail_msg("config_parse_bytes(\"%s\") failed", good[i].s);
                if (v != good[i].v)
                        fail_msg("config_parse_bytes(\"%s\") = %llu, expected %llu", good[i].s,
                                 (unsigned long long) v, (unsigned long long) good[i].v);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                uint64_t v = 42;

                if (config_parse_bytes(bad[i], &v) != -EINVAL)
                        fail_msg("config_parse_bytes(\"%s\") was accepted", bad[i]);
                assert_int_equal(v, 42);
        }
}

static void test_parse_seconds(void **state) {
        static const struct { const char *s; uint64_t v; } good[] = {
                { "0", 0 },
                { "30", 30 * USEC },
                { "30s", 30 * USEC },
                { "30sec", 30 * USEC },
                { "500ms", 500000 },
                { "5min", 300 * USEC },
                { "5m", 300 * USEC },
                { "1h", 3600 * USEC },
                { "18446744073709s", 18446744073709ULL * USEC },
                { "18446744073709551ms", 18446744073709551ULL * 1000 },
        };
        static const char *const bad[] = {
                "", " ", "-1", "+1", "1.5", "1.5s", "1 s", " 1", "1 ", "s", "ms", "infinity", "1x",
                "1sx", "0x10", "1e3",
                "18446744073710", "18446744073710s",          /* × 10^6 overflows */
                "18446744073709552ms",                       /* × 10^3 overflows */
                "307445734561826min", "5124095576031h",      /* × 60 / 3600 · 10^6 overflow */
                "18446744073709551616ms",                    /* overflow before the suffix */
        };

        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                uint64_t v = 42;

                if (config_parse_seconds(good[i].s, &v) != 0)
                        fail_msg("config_parse_seconds(\"%s\") failed", good[i].s);
                if (v != good[i].v)
                        fail_msg("config_parse_seconds(\"%s\") = %llu, expected %llu", good[i].s,
                                 (unsigned long long) v, (unsigned long long) good[i].v);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                uint64_t v = 42;

                if (config_parse_seconds(bad[i], &v) != -EINVAL)
                        fail_msg("config_parse_seconds(\"%s\") was accepted", bad[i]);
                assert_int_equal(v, 42);
        }
}

static void test_parse_bool(void **state) {
        static const char *const yes[] = { "1", "yes", "y", "true", "t", "on", "YES", "True", "ON", "Y" };
        static const char *const no[] = { "0", "no", "n", "false", "f", "off", "NO", "False", "Off", "N" };
        static const char *const bad[] = { "", " ", "2", "-1", "yess", "maybe", " yes", "yes ", "enable",
                                           "nope", "o", "10", "0x1", "truee" };

        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                bool b = false;

                if (config_parse_bool(yes[i], &b) != 0 || !b)
                        fail_msg("config_parse_bool(\"%s\") is not true", yes[i]);
        }
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
                bool b = true;

                if (config_parse_bool(no[i], &b) != 0 || b)
                        fail_msg("config_parse_bool(\"%s\") is not false", no[i]);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                bool b = true;

                if (config_parse_bool(bad[i], &b) != -EINVAL)
                        fail_msg("config_parse_bool(\"%s\") was accepted", bad[i]);
                assert_true(b);
        }
}

/* ---- structural errors --------------------------------------------------------------------- */

static void test_error_unknown_section(void **state) {
        assert_parse_fails("[Runner]\n# IdleExitSec=5\n[Foo]\n", 3, "[Foo]");
        assert_parse_fails("[runner]\n", 1, "unknown section");
        assert_parse_fails("[ Runner ]\n", 1, NULL);
        assert_parse_fails("# c\n\n[Listen]\n", 3, "unknown section");
}

static void test_error_unknown_key(void **state) {
        Config c;
        char *error = NULL;

        /* The whole message, once, exactly. */
        assert_int_equal(config_init(&c), 0);
        assert_int_equal(parse_as(&c, "/etc/sandbox-runner/runner.conf", "[Runner]\nNoSuchKey=1\n", &error),
                         -EINVAL);
        assert_string_equal(error, "/etc/sandbox-runner/runner.conf:2: unknown key 'NoSuchKey' in section [Runner]");
        free(error);
        config_done(&c);

        assert_parse_fails("[Runner]\nlisten=127.0.0.1:80\n", 2, "'listen'");          /* keys are case-sensitive */
        /* A dialect prefix does not make a bad address good, nor is an unknown one a dialect. */
        assert_parse_fails("[Runner]\nListen=sciencediscovery=localhost\n", 2, "[DIALECT=]");
        assert_parse_fails("[Runner]\nListen=other=127.0.0.1:80\n", 2, "[DIALECT=]");
        assert_parse_fails("[Auth]\nListen=127.0.0.1:80\n", 2, "'Listen'");            /* key of another section */
        assert_parse_fails("[Network]\nMode=none\n[Runner]\nMode=none\n", 4, "[Runner]");
        assert_parse_fails("[Runner]\n=5\n", 2, "unknown key");
}

static void test_error_outside_section(void **state) {
        assert_parse_fails("Listen=127.0.0.1:80\n", 1, "outside");
        assert_parse_fails("# comment\n\n; other comment\nIdleExitSec=5\n[Runner]\n", 4, "IdleExitSec");
        /* An unknown key outside any section is still reported as being outside a section. */
        assert_parse_fails("NoSuchKey=1\n", 1, "outside");
}

static void test_error_malformed_section(void **state) {
        assert_parse_fails("[Runner\n", 1, "malformed section header");
        assert_parse_fails("[]\n", 1, "malformed section header");
        assert_parse_fails("[Runner]x\n", 1, "malformed section header");
        assert_parse_fails("[Runner] # comment\n", 1, "malformed section header");
        assert_parse_fails("[Runner]\n\n[\n", 3, "malformed section header");
}

static void test_error_no_equals(void **state) {
        assert_parse_fails("[Runner]\nListen\n", 2, "KEY=VALUE");
        assert_parse_fails("[Runner]\nIdleExitSec 5\n", 2, "KEY=VALUE");
        assert_parse_fails("Runner]\n", 1, "KEY=VALUE");
        assert_parse_fails("garbage\n", 1, "KEY=VALUE");
}

static void test_error_line_too_long(void **state) {
        static char text[8192];
        char *p, *error = NULL;
        Config c;

        /* 4097 bytes on line 3 (newline excluded) is refused. */
        p = stpcpy(text, "[Runner]\n# x\n");
        memset(p, 'x', 4097);
        p[0] = '#';
        p[4097] = '\n';
        p[4098] = '\0';
        assert_parse_fails(text, 3, "4096");

        /* A line of exactly 4096 bytes is fine, and its value arrives intact. */
        p = stpcpy(text, "[Execution]\n");
        p = stpcpy(p, "Bwrap=/");
        memset(p, 'b', 4096 - strlen("Bwrap=/"));
        p[4096 - strlen("Bwrap=/")] = '\0';
        assert_int_equal(config_init(&c), 0);
        assert_int_equal(parse_as(&c, "test.conf", text, &error), 0);
        assert_null(error);
        assert_int_equal(strlen(c.bwrap), 4096 - strlen("Bwrap="));
        config_done(&c);
}

static void test_error_nul_byte(void **state) {
        static const char a[] = "[Runner]\nIdle\0ExitSec=5\n";
        static const char b[] = "[Runner]\n\n# comment \0 hidden\n";
        static const char d[] = "[Runner]\n# c\nIdleExitSec=5\0";

        assert_parse_fails_n(a, sizeof(a) - 1, 2, "NUL");
        /* Even inside a comment. */
        assert_parse_fails_n(b, sizeof(b) - 1, 3, "NUL");
        /* Or as the very last byte. */
        assert_parse_fails_n(d, sizeof(d) - 1, 3, "NUL");
}

static void test_error_file_too_large(void **state) {
        Config c;
        char *data, *error = NULL;
        size_t size = MIB + 1;

        /* 1 MiB of comment lines is accepted... */
        data = malloc(size);
        assert_non_null(data);
        for (size_t i = 0; i < size; i++)
                data[i] = (i % 64 == 63) ? '\n' : '#';
        assert_int_equal(config_init(&c), 0);
        assert_int_equal(config_parse_buffer(&c, "test.conf", data, MIB, &error), 0);
        assert_null(error);

        /* ...one byte more is not, whatever the content. */
        assert_int_equal(config_parse_buffer(&c, "test.conf", data, size, &error), -EINVAL);
        assert_non_null(error);
        assert_true(strncmp(error, "test.conf:", strlen("test.conf:")) == 0);
        assert_non_null(strstr(error, "1048576"));
        free(error);
        config_done(&c);
        free(data);
}

static void test_error_line_numbers(void **state) {
        /* Comments, blank lines and CRLF endings count; the last line may lack a newline. */
        assert_parse_fails("[Runner]\r\n\r\n; c\r\n# c\r\nIdleExitSec=x", 5, "IdleExitSec=");
        assert_parse_fails("\n\n\n\n\n\n\n\n\n[Runner]\n# IdleExitSec=5\nLogLevel=loud\n", 12, "LogLevel=");
        /* The first bad line is reported, not a later one. */
        assert_parse_fails("[Runner]\nMaxConnections=many\nLogLevel=loud\n", 2, "MaxConnections=");
}

/* ---- bad values of every kind --------------------------------------------------------------- */

static void test_error_bad_values(void **state) {
        static const struct { const char *section, *key, *value; } bad[] = {
                /* listen addresses */
                { "Runner", "Listen", "127.0.0.1:0" },
                { "Runner", "Listen", "127.0.0.1:65536" },
                { "Runner", "Listen", "127.0.0.1:+80" },
                { "Runner", "Listen", "127.0.0.1:080" },
                { "Runner", "Listen", "127.1:80" },
                { "Runner", "Listen", "127.0.0.1" },
                { "Runner", "Listen", "localhost:80" },
                { "Runner", "Listen", "[::1]" },
                { "Runner", "Listen", "::1:80" },
                { "Runner", "Listen", "run/api.sock" },
                { "Runner", "Listen", "api.sock" },
                /* time spans */
                { "Runner", "IdleExitSec", "soon" },
                { "Runner", "IdleExitSec", "-1" },
                { "Runner", "IdleExitSec", "1.5s" },
                { "Runner", "HeaderTimeoutSec", "10x" },
                { "Runner", "RequestTimeoutSec", "" },
                { "Runner", "RequestTimeoutSec", "18446744073710s" },
                { "Auth", "SignatureMaxSkewSec", "infinity" },
                { "Execution", "DefaultTimeoutSec", "30 s" },
                { "Execution", "MaxTimeoutSec", "1hour" },
                /* log levels */
                { "Runner", "LogLevel", "loud" },
                { "Runner", "LogLevel", "" },
                { "Runner", "LogLevel", "8" },
                /* unsigned integers */
                { "Runner", "MaxConnections", "-1" },
                { "Runner", "MaxConnections", "1000001" },
                { "Runner", "MaxConnections", "many" },
                { "Runner", "MaxConnections", "" },
                { "Runner", "MaxConnectionsPerClient", "4294967297" },
                { "Runner", "MaxConnectionsPerClient", "1K" },
                { "Execution", "TasksMax", "-1" },
                { "Execution", "TasksMax", "1K" },
                { "Execution", "TasksMax", "" },
                { "Execution", "TasksMax", "18446744073709551616" },
                /* sizes */
                { "Runner", "MaxRequestBodyBytes", "16MB" },
                { "Runner", "MaxRequestBodyBytes", "1k" },
                { "Runner", "MaxRequestBodyBytes", "" },
                { "Runner", "MaxRequestBodyBytes", "18446744073709551616" },
                { "Execution", "MemoryMax", "16777216T" },
                { "Execution", "MemoryMax", "1.5G" },
                { "Execution", "TmpSize", "-1" },
                { "Quota", "MaxWorkspaceBytes", "10 G" },
                { "Quota", "MaxOutputBytes", "1P" },
                { "Quota", "MaxUploadFileBytes", "lots" },
                { "Quota", "MaxUploadRequestBytes", "17179869184G" },
                /* booleans */
                { "Execution", "SandboxUser", "-root" },
                { "Execution", "SandboxUser", "a b" },
                { "Execution", "SandboxUser", "a/b" },
                { "Execution", "SandboxUser", "x$y" },
                { "Execution", "AllowUnscoped", "maybe" },
                { "Execution", "AllowUnscoped", "" },
                { "Execution", "AllowUnscoped", "2" },
                { "NPU", "Enable", "enabled" },
                { "Environments", "Offline", "sometimes" },
                { "Environments", "Preset", "tu na" },
                { "Environments", "IndexURL", "https://a.example/\x01" },
                { "Environments", "Wheelhouse", "relative/dir" },
                { "Environments", "SetupTimeoutSec", "forever" },
                { "Environments", "IndexCA", "relative.pem" },
                { "NPU", "DeviceRoot", "relative/dev" },
                { "NPU", "NpuSmi", "npu-smi" },
                { "NPU", "ProbeTimeoutSec", "soon" },
                { "NPU", "Broker", "maybe" },
                { "NPU", "WorkloadsFile", "w.json" },
                { "Kernels", "Enable", "perhaps" },
                { "Kernels", "MaxKernels", "-1" },
                { "Kernels", "IdleTimeoutSec", "idle" },
                { "Kernels", "MemoryMax", "2 G" },
                { "Kernels", "CPUQuota", "50" },
                { "Kernels", "MaxMessageBytes", "huge" },
                { "Kernels", "MaxOutputBytes", "-1" },
                /* percentages */
                { "Execution", "CPUQuota", "100" },
                { "Execution", "CPUQuota", "%" },
                { "Execution", "CPUQuota", "-5%" },
                { "Execution", "CPUQuota", "1.5%" },
                { "Execution", "CPUQuota", "50 %" },
                { "Execution", "CPUQuota", "100001%" },
                { "Execution", "CPUQuota", "" },
                /* paths */
                { "Auth", "TokenFile", "token.txt" },
                { "Auth", "SigningKeyFile", "./key" },
                { "Execution", "Bwrap", "bwrap" },
                /* network mode */
                { "Network", "Mode", "open" },
                { "Network", "Mode", "None" },
                { "Network", "Mode", "" },
                { "Network", "Mode", "allowlist none" },
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *text = NULL, key[64];

                assert_true(asprintf(&text, "# sandbox-runner\n[%s]\n%s=%s\n",
                                     bad[i].section, bad[i].key, bad[i].value) > 0);
                (void) snprintf(key, sizeof(key), "%s=", bad[i].key);
                assert_parse_fails(text, 3, key);
                free(text);
        }
}

/* ---- good values of every key -------------------------------------------------------------- */

static void test_good_runner(void **state) {
        Config *c = *state;

        assert_parse_ok(c,
                        "[Runner]\n"
                        "IdleExitSec=0\n"
                        "LogLevel=debug\n"
                        "MaxConnections=1000000\n"
                        "MaxConnectionsPerClient=0\n"
                        "HeaderTimeoutSec=500ms\n"
                        "RequestTimeoutSec=2min\n"
                        "MaxRequestBodyBytes=64M\n");
        assert_int_equal(c->idle_exit_usec, 0);
        assert_int_equal(c->log_level, LOG_DEBUG);
        assert_int_equal(c->max_connections, 1000000);
        assert_int_equal(c->max_connections_per_client, 0);
        assert_int_equal(c->header_timeout_usec, 500000);
        assert_int_equal(c->request_timeout_usec, 120 * USEC);
        assert_int_equal(c->max_request_body_bytes, 64ULL << 20);

        assert_parse_ok(c, "[Runner]\nLogLevel=warning\nIdleExitSec=1h\nMaxRequestBodyBytes=infinity\n");
        assert_int_equal(c->log_level, LOG_WARNING);
        assert_int_equal(c->idle_exit_usec, 3600 * USEC);
        assert_int_equal(c->max_request_body_bytes, 0);

        assert_parse_ok(c, "[Runner]\nLogLevel=err\n");
        assert_int_equal(c->log_level, LOG_ERR);
}

static void test_good_listen(void **state) {
        Config *c = *state;

        /* Accumulates onto the default, like systemd's ListenStream=. */
        assert_parse_ok(c, "[Runner]\nListen=127.0.0.1:8080\nListen=[::1]:80\n");
        assert_int_equal(strv_len(c->listen), 3);
        assert_string_equal(c->listen[0], "127.0.0.1:4311");
        assert_string_equal(c->listen[1], "127.0.0.1:8080");
        assert_string_equal(c->listen[2], "[::1]:80");

        /* An empty assignment resets the list, then entries accumulate again. */
        assert_parse_ok(c, "[Runner]\nListen=\nListen=/run/sandbox-runner/api.sock\nListen=  127.0.0.1:65535  \n");
        assert_int_equal(strv_len(c->listen), 2);
        assert_string_equal(c->listen[0], "/run/sandbox-runner/api.sock");
        assert_string_equal(c->listen[1], "127.0.0.1:65535");

        assert_parse_ok(c, "[Runner]\nListen=\n");
        assert_int_equal(strv_len(c->listen), 0);

        assert_parse_ok(c, "[Runner]\nListen=[::]:1\n");
        assert_int_equal(strv_len(c->listen), 1);
        assert_string_equal(c->listen[0], "[::]:1");
        /* A dialect prefix (docs/api.md section 15) is kept for the listener; the address after
         * it is checked like any other. */
        assert_parse_ok(c, "[Runner]\nListen=\nListen=sciencediscovery=127.0.0.1:4312\nListen=api=[::1]:4311\n");
        assert_int_equal(strv_len(c->listen), 2);
        assert_string_equal(c->listen[0], "sciencediscovery=127.0.0.1:4312");
        assert_string_equal(c->listen[1], "api=[::1]:4311");
}

static void test_good_auth(void **state) {
        Config *c = *state;

        assert_parse_ok(c,
                        "[Auth]\n"
                        "TokenFile=/etc/sandbox-runner/token\n"
                        "SigningKeyFile=/etc/sandbox-runner/signing-key\n"
                        "SignatureMaxSkewSec=60\n");
        assert_string_equal(c->token_file, "/etc/sandbox-runner/token");
        assert_string_equal(c->signing_key_file, "/etc/sandbox-runner/signing-key");
        assert_int_equal(c->signature_max_skew_usec, 60 * USEC);

        /* Later assignments win; an empty one resets. */
        assert_parse_ok(c, "[Auth]\nTokenFile=/other\nSigningKeyFile=\nSignatureMaxSkewSec=5min\n");
        assert_string_equal(c->token_file, "/other");
        assert_null(c->signing_key_file);
        assert_int_equal(c->signature_max_skew_usec, 300 * USEC);
}

static void test_good_execution(void **state) {
        Config *c = *state;

        assert_parse_ok(c,
                        "[Execution]\n"
                        "Bwrap=/opt/bubblewrap/bin/bwrap\n"
                        "AllowUnscoped=yes\n"
                        "DefaultTimeoutSec=45\n"
                        "MaxTimeoutSec=2h\n"
                        "MemoryMax=512M\n"
                        "TasksMax=1024\n"
                        "CPUQuota=250%\n"
                        "TmpSize=64MiB\n");
        assert_string_equal(c->bwrap, "/opt/bubblewrap/bin/bwrap");
        assert_true(c->allow_unscoped);
        assert_int_equal(c->default_timeout_usec, 45 * USEC);
        assert_int_equal(c->max_timeout_usec, 7200 * USEC);
        assert_int_equal(c->memory_max, 512ULL << 20);
        assert_int_equal(c->tasks_max, 1024);
        assert_int_equal(c->cpu_quota_percent, 250);
        assert_int_equal(c->tmp_size, 64ULL << 20);

        assert_parse_ok(c,
                        "[Execution]\n"
                        "AllowUnscoped=off\n"
                        "MemoryMax=infinity\n"
                        "TasksMax=infinity\n"
                        "CPUQuota=0%\n"
                        "TmpSize=1G\n");
        assert_false(c->allow_unscoped);
        assert_int_equal(c->memory_max, 0);
        assert_int_equal(c->tasks_max, 0);
        assert_int_equal(c->cpu_quota_percent, 0);
        assert_int_equal(c->tmp_size, 1ULL << 30);

        /* SandboxUser=: a name or a uid; empty: the service user again. */
        assert_string_equal(c->sandbox_user, SERVICE_USER);
        assert_parse_ok(c, "[Execution]\nSandboxUser=runner-2\n");
        assert_string_equal(c->sandbox_user, "runner-2");
        assert_parse_ok(c, "[Execution]\nSandboxUser=4711\n");
        assert_string_equal(c->sandbox_user, "4711");
        assert_parse_ok(c, "[Execution]\nSandboxUser=\n");
        assert_string_equal(c->sandbox_user, SERVICE_USER);

        assert_parse_ok(c, "[Execution]\nCPUQuota=100000%\nTasksMax=18446744073709551615\n");
        assert_int_equal(c->cpu_quota_percent, 100000);
        assert_int_equal(c->tasks_max, UINT64_MAX);
}

static void test_good_quota(void **state) {
        Config *c = *state;

        assert_parse_ok(c,
                        "[Quota]\n"
                        "MaxWorkspaceBytes=2T\n"
                        "MaxOutputBytes=10K\n"
                        "MaxUploadFileBytes=3G\n"
                        "MaxUploadRequestBytes=12345\n");
        assert_int_equal(c->max_workspace_bytes, 2ULL << 40);
        assert_int_equal(c->max_output_bytes, 10ULL << 10);
        assert_int_equal(c->max_upload_file_bytes, 3ULL << 30);
        assert_int_equal(c->max_upload_request_bytes, 12345);

        assert_parse_ok(c,
                        "[Quota]\n"
                        "MaxWorkspaceBytes=infinity\n"
                        "MaxOutputBytes=0\n"
                        "MaxUploadFileBytes=1B\n"
                        "MaxUploadRequestBytes=4TiB\n");
        assert_int_equal(c->max_workspace_bytes, 0);
        assert_int_equal(c->max_output_bytes, 0);
        assert_int_equal(c->max_upload_file_bytes, 1);
        assert_int_equal(c->max_upload_request_bytes, 4ULL << 40);
}

static void test_good_network(void **state) {
        Config *c = *state;

        assert_parse_ok(c,
                        "[Network]\n"
                        "Mode=allowlist\n"
                        "Allow=example.org *.example.org:443\n"
                        "Allow=\tfoo.test   bar.test \n"
                        "Mirrors=127.0.0.0/8 10.0.0.0/8\n");
        assert_int_equal(c->network_mode, NETWORK_MODE_ALLOWLIST);
        assert_int_equal(strv_len(c->network_allow), 4);
        assert_string_equal(c->network_allow[0], "example.org");
        assert_string_equal(c->network_allow[1], "*.example.org:443");
        assert_string_equal(c->network_allow[2], "foo.test");
        assert_string_equal(c->network_allow[3], "bar.test");
        assert_int_equal(strv_len(c->network_mirrors), 2);
        assert_string_equal(c->network_mirrors[0], "127.0.0.0/8");
        assert_string_equal(c->network_mirrors[1], "10.0.0.0/8");

        assert_parse_ok(c, "[Network]\nAllow=\nAllow=only.test\nMirrors=\nMode=none\n");
        assert_int_equal(c->network_mode, NETWORK_MODE_NONE);
        assert_int_equal(strv_len(c->network_allow), 1);
        assert_string_equal(c->network_allow[0], "only.test");
        assert_null(c->network_mirrors);
}

static void test_good_environments(void **state) {
        Config *c = *state;

        assert_parse_ok(c, "[Environments]\nBootstrap=\nOffline=yes\nPreset=tuna\n"
                           "Wheelhouse=/srv/wheels\nChannels=conda-forge https://x.example/c\n"
                           "Micromamba=/opt/mm/micromamba\nMicromambaSHA256=00ff\nSetupTimeoutSec=10min\n"
                           "Mirrors=10.0.0.0/8\nIndexCA=/etc/ssl/mirror-ca.pem\n");
        assert_string_equal(c->env_mirrors[0], "10.0.0.0/8");
        assert_string_equal(c->env_index_ca, "/etc/ssl/mirror-ca.pem");
        assert_null(c->env_bootstrap);
        assert_true(c->env_offline);
        assert_string_equal(c->env_preset, "tuna");
        assert_string_equal(c->env_wheelhouse, "/srv/wheels");
        assert_string_equal(c->env_channels[0], "conda-forge");
        assert_string_equal(c->env_channels[1], "https://x.example/c");
        assert_null(c->env_channels[2]);
        assert_string_equal(c->env_micromamba, "/opt/mm/micromamba");
        assert_int_equal(c->env_setup_timeout_usec, 600 * USEC);
        assert_parse_ok(c, "[Environments]\nPreset=\nBootstrap=python-base r-base\n");
        assert_null(c->env_preset);
        assert_string_equal(c->env_bootstrap[1], "r-base");
}

static void test_verify_environments(void **state) {
        Config *c = *state;
        char *error = NULL;

        assert_parse_ok(c, "[Environments]\nMicromamba=/opt/mm/micromamba\n");
        assert_int_equal(config_verify(c, &error), -EINVAL);
        assert_non_null(strstr(error, "MicromambaSHA256="));
        free(error);
        error = NULL;
        assert_parse_ok(c, "[Environments]\nMicromambaSHA256=00ff\n");
        assert_int_equal(config_verify(c, &error), 0);
        assert_parse_ok(c, "[Environments]\nSetupTimeoutSec=500ms\n");
        assert_int_equal(config_verify(c, &error), -EINVAL);
        assert_non_null(strstr(error, "SetupTimeoutSec="));
        free(error);
        error = NULL;
        assert_parse_ok(c, "[Environments]\nSetupTimeoutSec=5s\nPythonBase=conda\n");
        assert_int_equal(config_verify(c, &error), -EINVAL);
        assert_non_null(strstr(error, "PythonBase= must be"));
        free(error);
        error = NULL;
        assert_parse_ok(c, "[Environments]\nPythonBase=wheelhouse\n");
        assert_int_equal(config_verify(c, &error), -EINVAL);
        assert_non_null(strstr(error, "needs Wheelhouse="));
        free(error);
        error = NULL;
        assert_parse_ok(c, "[Environments]\nWheelhouse=/srv/w\nPythonBasePackages=\n");
        assert_int_equal(config_verify(c, &error), -EINVAL);
        assert_non_null(strstr(error, "needs PythonBasePackages="));
        free(error);
        error = NULL;
        assert_parse_ok(c, "[Environments]\nPythonBasePackages=numpy\n");
        assert_int_equal(config_verify(c, &error), 0);
        assert_string_equal(c->env_python_base, "wheelhouse");
}

static void test_good_npu(void **state) {
        Config *c = *state;

        assert_parse_ok(c, "[NPU]\nEnable=true\n");
        assert_true(c->npu_enable);
        assert_parse_ok(c, "[NPU]\nEnable=0\n");
        assert_false(c->npu_enable);

        /* The defaults: the canonical Ascend paths, both CDI directories, no broker. */
        assert_string_equal(c->npu_device_root, "/dev");
        assert_string_equal(c->npu_driver_dir, "/usr/local/Ascend/driver");
        assert_string_equal(c->npu_toolkit_dir, "/usr/local/Ascend/ascend-toolkit/latest");
        assert_string_equal(c->npu_smi, "/usr/local/sbin/npu-smi");
        assert_null(c->npu_dcmi_library);
        assert_int_equal(strv_len(c->npu_cdi_dirs), 2);
        assert_string_equal(c->npu_cdi_dirs[0], "/etc/cdi");
        assert_string_equal(c->npu_cdi_dirs[1], "/var/run/cdi");
        assert_int_equal(c->npu_probe_timeout_usec, 10 * USEC_PER_SEC);
        assert_false(c->npu_broker);

        assert_parse_ok(c, "[NPU]\nDeviceRoot=/srv/fake/dev\nDriverDirectory=/opt/d\nToolkitDirectory=\n"
                           "NpuSmi=/opt/d/npu-smi\nDcmiLibrary=/opt/d/libdcmi.so\nProbeTimeoutSec=3s\n"
                           "CDISpecDirectories=/run/cdi-a /run/cdi-b /run/cdi-c\nBroker=yes\n"
                           "WorkloadsFile=/etc/w.json\nRepositoryDirectory=/srv/checkout\n");
        assert_string_equal(c->npu_device_root, "/srv/fake/dev");
        assert_string_equal(c->npu_driver_dir, "/opt/d");
        assert_null(c->npu_toolkit_dir);
        assert_string_equal(c->npu_smi, "/opt/d/npu-smi");
        assert_string_equal(c->npu_dcmi_library, "/opt/d/libdcmi.so");
        assert_int_equal(c->npu_probe_timeout_usec, 3 * USEC_PER_SEC);
        assert_int_equal(strv_len(c->npu_cdi_dirs), 5);   /* appended to the defaults, as every list */
        assert_string_equal(c->npu_cdi_dirs[4], "/run/cdi-c");
        assert_true(c->npu_broker);
        assert_string_equal(c->npu_workloads_file, "/etc/w.json");
        assert_string_equal(c->npu_repo_dir, "/srv/checkout");
        assert_parse_ok(c, "[NPU]\nCDISpecDirectories=\nCDISpecDirectories=/x\n");
        assert_int_equal(strv_len(c->npu_cdi_dirs), 1);
}

static void test_verify_npu(void **state) {
        Config *c = *state;
        char *error = NULL;

        assert_parse_ok(c, "[NPU]\nProbeTimeoutSec=100ms\n");
        assert_int_equal(config_verify(c, &error), -EINVAL);
        assert_non_null(strstr(error, "ProbeTimeoutSec="));
        free(error);
        error = NULL;
        assert_parse_ok(c, "[NPU]\nProbeTimeoutSec=1s\nBroker=yes\n");
        assert_int_equal(config_verify(c, &error), -EINVAL);
        assert_non_null(strstr(error, "needs WorkloadsFile= and RepositoryDirectory="));
        free(error);
        error = NULL;
        assert_parse_ok(c, "[NPU]\nWorkloadsFile=/etc/w.json\nRepositoryDirectory=/srv/c\n");
        assert_int_equal(config_verify(c, &error), -EINVAL);
        assert_non_null(strstr(error, "Broker=yes needs Enable=yes"));
        free(error);
        error = NULL;
        assert_parse_ok(c, "[NPU]\nEnable=yes\n");
        assert_int_equal(config_verify(c, &error), 0);
}

static void test_kernels(void **state) {
        Config *c = *state;
        char *error = NULL;

        /* The defaults: off, a cap, culling after an hour, a day's lifetime, 16M messages. */
        assert_false(c->kernels_enable);
        assert_int_equal(c->kernels_max, 16);
        assert_int_equal(c->kernels_idle_timeout_usec, 3600 * USEC_PER_SEC);
        assert_int_equal(c->kernels_max_lifetime_usec, 24 * 3600 * USEC_PER_SEC);
        assert_int_equal(c->kernels_prespawn, 0);
        assert_int_equal(c->kernels_memory_max, 2ULL << 30);
        assert_int_equal(c->kernels_tasks_max, 256);
        assert_int_equal(c->kernels_cpu_quota_percent, 100);
        assert_int_equal(c->kernels_max_message_bytes, 16ULL << 20);
        assert_int_equal(c->kernels_max_output_bytes, 64ULL << 20);

        assert_parse_ok(c, "[Kernels]\nEnable=yes\nMaxKernels=3\nIdleTimeoutSec=10min\nMaxLifetimeSec=0\n"
                           "Prespawn=2\nMemoryMax=512M\nTasksMax=64\nCPUQuota=50%\nMaxMessageBytes=10M\n"
                           "MaxOutputBytes=1K\n");
        assert_true(c->kernels_enable);
        assert_int_equal(c->kernels_max, 3);
        assert_int_equal(c->kernels_idle_timeout_usec, 600 * USEC_PER_SEC);
        assert_int_equal(c->kernels_max_lifetime_usec, 0);
        assert_int_equal(c->kernels_prespawn, 2);
        assert_int_equal(c->kernels_memory_max, 512ULL << 20);
        assert_int_equal(c->kernels_tasks_max, 64);
        assert_int_equal(c->kernels_cpu_quota_percent, 50);
        assert_int_equal(c->kernels_max_message_bytes, 10ULL << 20);
        assert_int_equal(c->kernels_max_output_bytes, 1024);
        assert_int_equal(config_verify(c, &error), 0);

        assert_parse_ok(c, "[Kernels]\nMemoryMax=1M\n");
        assert_int_equal(config_verify(c, &error), -EINVAL);
        assert_non_null(strstr(error, "[Kernels] MemoryMax="));
        free(error);
        error = NULL;
        assert_parse_ok(c, "[Kernels]\nMemoryMax=0\nMaxMessageBytes=1K\n");
        assert_int_equal(config_verify(c, &error), -EINVAL);
        assert_non_null(strstr(error, "MaxMessageBytes="));
        free(error);
        error = NULL;
        assert_parse_ok(c, "[Kernels]\nMaxMessageBytes=64K\nIdleTimeoutSec=10ms\n");
        assert_int_equal(config_verify(c, &error), -EINVAL);
        assert_non_null(strstr(error, "IdleTimeoutSec="));
        free(error);
        error = NULL;
        assert_parse_ok(c, "[Kernels]\nIdleTimeoutSec=0\nMaxOutputBytes=0\n");
        assert_int_equal(c->kernels_max_output_bytes, 0);
        assert_int_equal(config_verify(c, &error), 0);
}

static void test_good_syntax(void **state) {
        Config *c = *state;

        /* Comments, blank lines, surrounding blanks, CRLF, sections reopened, no final newline. */
        assert_parse_ok(c,
                        "# comment\r\n"
                        "; also a comment\r\n"
                        "\r\n"
                        "   [Runner]   \r\n"
                        "  IdleExitSec  =  7  \r\n"
                        "\tMaxConnections\t=\t9\t\r\n"
                        "[Execution]\r\n"
                        "TasksMax=5\r\n"
                        "[Runner]\r\n"
                        "MaxConnectionsPerClient=3");
        assert_int_equal(c->idle_exit_usec, 7 * USEC);
        assert_int_equal(c->max_connections, 9);
        assert_int_equal(c->tasks_max, 5);
        assert_int_equal(c->max_connections_per_client, 3);

        /* An empty buffer and a comments-only one change nothing. */
        {
                char *error = NULL;

                assert_int_equal(config_parse_buffer(c, "empty.conf", "", 0, &error), 0);
                assert_null(error);
        }
        assert_parse_ok(c, "# nothing\n\n");
        assert_int_equal(c->idle_exit_usec, 7 * USEC);

        /* The value is everything after the first '='. */
        assert_parse_ok(c, "[Auth]\nTokenFile=/a=b\n");
        assert_string_equal(c->token_file, "/a=b");
}

/* ---- config_load() ------------------------------------------------------------------------- */

typedef struct LoadFixture {
        char dir[64];
        char *main_path;
        char *dropin_dir;
        Config config;
} LoadFixture;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

static int setup_load(void **state) {
        LoadFixture *f = calloc(1, sizeof(LoadFixture));
        const char *tmp = getenv("TMPDIR");

        if (!f)
                return -1;
        (void) snprintf(f->dir, sizeof(f->dir), "%s/test-config.XXXXXX",
                        tmp && tmp[0] == '/' && strlen(tmp) < 30 ? tmp : "/tmp");
        if (!mkdtemp(f->dir) ||
            asprintf(&f->main_path, "%s/runner.conf", f->dir) < 0 ||
            asprintf(&f->dropin_dir, "%s/runner.conf.d", f->dir) < 0 ||
            config_init(&f->config) < 0)
                return -1;
        *state = f;
        return 0;
}

static int teardown_load(void **state) {
        LoadFixture *f = *state;

        (void) nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        config_done(&f->config);
        free(f->main_path);
        free(f->dropin_dir);
        free(f);
        return 0;
}

static void write_file(const char *dir, const char *name, const char *content) {
        char *path = NULL;
        FILE *f;

        assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
        f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fwrite(content, 1, strlen(content), f), strlen(content));
        assert_int_equal(fclose(f), 0);
        free(path);
}

static void make_dropin_dir(LoadFixture *f) {
        assert_int_equal(mkdir(f->dropin_dir, 0755), 0);
}

static void test_load_order(void **state) {
        LoadFixture *f = *state;
        char *error = NULL;

        write_file(f->dir, "runner.conf",
                   "[Runner]\nIdleExitSec=1\nMaxConnections=1\n[Network]\nAllow=main.test\n");
        make_dropin_dir(f);
        /* Created out of order: the load order must come from the names, not from readdir(). */
        write_file(f->dropin_dir, "9-late.conf", "[Runner]\nMaxConnections=9\n[Network]\nAllow=late.test\n");
        write_file(f->dropin_dir, "20-b.conf", "[Runner]\nIdleExitSec=20\n[Network]\nAllow=b.test\n");
        write_file(f->dropin_dir, "10-a.conf",
                   "[Runner]\nIdleExitSec=10\nMaxConnections=7\nLogLevel=debug\n[Network]\nAllow=a.test\n");
        /* Not "*.conf" (or hidden): ignored, even though their content is invalid. */
        write_file(f->dropin_dir, "README", "this is not a config file\n");
        write_file(f->dropin_dir, "30-c.conf.bak", "[Bogus]\n");
        write_file(f->dropin_dir, "40-d.conf~", "[Bogus]\n");
        write_file(f->dropin_dir, "50-e.CONF", "[Bogus]\n");
        write_file(f->dropin_dir, "conf", "[Bogus]\n");
        write_file(f->dropin_dir, "60-fconf", "[Bogus]\n");
        write_file(f->dropin_dir, ".hidden.conf", "[Bogus]\n");

        assert_int_equal(config_load(&f->config, f->main_path, true, &error), 0);
        assert_null(error);
        /* Lexical order: runner.conf, 10-a.conf, 20-b.conf, 9-late.conf; later wins. */
        assert_int_equal(f->config.idle_exit_usec, 20 * USEC);
        assert_int_equal(f->config.max_connections, 9);
        assert_int_equal(f->config.log_level, LOG_DEBUG);
        assert_int_equal(strv_len(f->config.network_allow), 4);
        assert_string_equal(f->config.network_allow[0], "main.test");
        assert_string_equal(f->config.network_allow[1], "a.test");
        assert_string_equal(f->config.network_allow[2], "b.test");
        assert_string_equal(f->config.network_allow[3], "late.test");
}

static void test_load_missing_optional(void **state) {
        LoadFixture *f = *state;
        char *error = NULL;

        /* No main file, no drop-in directory: the defaults stand. */
        assert_int_equal(config_load(&f->config, f->main_path, false, &error), 0);
        assert_null(error);
        assert_int_equal(f->config.idle_exit_usec, 300 * USEC);

        /* No main file, but drop-ins: they still apply. */
        make_dropin_dir(f);
        write_file(f->dropin_dir, "50-x.conf", "[Runner]\nIdleExitSec=42\n");
        assert_int_equal(config_load(&f->config, f->main_path, false, &error), 0);
        assert_null(error);
        assert_int_equal(f->config.idle_exit_usec, 42 * USEC);
}

static void test_load_missing_required(void **state) {
        LoadFixture *f = *state;
        char *error = NULL;

        assert_int_equal(config_load(&f->config, f->main_path, true, &error), -ENOENT);
        assert_non_null(error);
        assert_non_null(strstr(error, f->main_path));
        free(error);

        /* Present and required: fine. */
        error = NULL;
        write_file(f->dir, "runner.conf", "[Runner]\nIdleExitSec=3\n");
        assert_int_equal(config_load(&f->config, f->main_path, true, &error), 0);
        assert_null(error);
        assert_int_equal(f->config.idle_exit_usec, 3 * USEC);
}

static void test_load_error_in_main(void **state) {
        LoadFixture *f = *state;
        char *error = NULL, *expected = NULL;

        write_file(f->dir, "runner.conf", "[Runner]\n\nIdleExitSec=never\n");
        assert_int_equal(config_load(&f->config, f->main_path, false, &error), -EINVAL);
        assert_non_null(error);
        assert_true(asprintf(&expected, "%s:3: ", f->main_path) > 0);
        assert_true(strncmp(error, expected, strlen(expected)) == 0);
        free(expected);
        free(error);
}

static void test_load_error_in_dropin(void **state) {
        LoadFixture *f = *state;
        char *error = NULL, *expected = NULL;

        write_file(f->dir, "runner.conf", "[Runner]\nIdleExitSec=3\n");
        make_dropin_dir(f);
        write_file(f->dropin_dir, "10-a.conf", "[Runner]\nIdleExitSec=10\n");
        write_file(f->dropin_dir, "20-b.conf", "# comment\n[Execution]\nCPUQuota=lots\n");
        write_file(f->dropin_dir, "30-c.conf", "[Runner]\nIdleExitSec=30\n");

        assert_int_equal(config_load(&f->config, f->main_path, true, &error), -EINVAL);
        assert_non_null(error);
        assert_true(asprintf(&expected, "%s/20-b.conf:3: ", f->dropin_dir) > 0);
        if (strncmp(error, expected, strlen(expected)) != 0)
                fail_msg("error '%s' does not start with '%s'", error, expected);
        assert_non_null(strstr(error, "CPUQuota="));
        free(expected);
        free(error);
}

static void test_load_too_large(void **state) {
        LoadFixture *f = *state;
        char *error = NULL, *data;
        FILE *file;

        data = malloc(MIB + 1);
        assert_non_null(data);
        memset(data, '#', MIB + 1);
        data[MIB] = '\n';
        file = fopen(f->main_path, "we");
        assert_non_null(file);
        assert_int_equal(fwrite(data, 1, MIB + 1, file), MIB + 1);
        assert_int_equal(fclose(file), 0);
        free(data);

        assert_true(config_load(&f->config, f->main_path, false, &error) < 0);
        assert_non_null(error);
        assert_true(strncmp(error, f->main_path, strlen(f->main_path)) == 0);
        free(error);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_defaults, setup_config, teardown_config),
                cmocka_unit_test(test_network_mode_strings),
                cmocka_unit_test(test_parse_bytes),
                cmocka_unit_test(test_parse_seconds),
                cmocka_unit_test(test_parse_bool),
                cmocka_unit_test(test_error_unknown_section),
                cmocka_unit_test(test_error_unknown_key),
                cmocka_unit_test(test_error_outside_section),
                cmocka_unit_test(test_error_malformed_section),
                cmocka_unit_test(test_error_no_equals),
                cmocka_unit_test(test_error_line_too_long),
                cmocka_unit_test(test_error_nul_byte),
                cmocka_unit_test(test_error_file_too_large),
                cmocka_unit_test(test_error_line_numbers),
                cmocka_unit_test(test_error_bad_values),
                cmocka_unit_test_setup_teardown(test_good_runner, setup_config, teardown_config),
                cmocka_unit_test_setup_teardown(test_good_listen, setup_config, teardown_config),
                cmocka_unit_test_setup_teardown(test_good_auth, setup_config, teardown_config),
                cmocka_unit_test_setup_teardown(test_good_execution, setup_config, teardown_config),
                cmocka_unit_test_setup_teardown(test_good_quota, setup_config, teardown_config),
                cmocka_unit_test_setup_teardown(test_good_network, setup_config, teardown_config),
                cmocka_unit_test_setup_teardown(test_good_environments, setup_config, teardown_config),
                cmocka_unit_test_setup_teardown(test_verify_environments, setup_config, teardown_config),
                cmocka_unit_test_setup_teardown(test_good_npu, setup_config, teardown_config),
                cmocka_unit_test_setup_teardown(test_kernels, setup_config, teardown_config),
                cmocka_unit_test_setup_teardown(test_verify_npu, setup_config, teardown_config),
                cmocka_unit_test_setup_teardown(test_good_syntax, setup_config, teardown_config),
                cmocka_unit_test_setup_teardown(test_load_order, setup_load, teardown_load),
                cmocka_unit_test_setup_teardown(test_load_missing_optional, setup_load, teardown_load),
                cmocka_unit_test_setup_teardown(test_load_missing_required, setup_load, teardown_load),
                cmocka_unit_test_setup_teardown(test_load_error_in_main, setup_load, teardown_load),
                cmocka_unit_test_setup_teardown(test_load_error_in_dropin, setup_load, teardown_load),
                cmocka_unit_test_setup_teardown(test_load_too_large, setup_load, teardown_load),
        };

        return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
