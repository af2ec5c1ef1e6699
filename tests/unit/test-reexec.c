/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/core/reexec.h: taking over what the previous image handed on, and refusing
 * what is not such a hand-over (the environment variable is the only input). */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <json-c/json.h>

#include "core/reexec.h"
#include "sandbox/cgroup.h"
#include "util/fd-util.h"
#include "util/macro.h"

#define TOKEN "0123456789abcdef0123456789abcdef"
#define KEY   "fedcba9876543210fedcba9876543210"

static int listening_socket(void) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *) &a, sizeof(a)), 0);
        assert_int_equal(listen(fd, 4), 0);
        return fd;
}

static int secret_fd(const char *s) {
        int fd = memfd_new_data("test-secret", s, strlen(s));

        assert_true(fd >= 0);
        return fd;
}

/* Set $SANDBOX_RUNNER_REEXEC_FD to a memfd holding @json; return that fd. */
static int set_state(const char *json) {
        char v[32];
        int fd = memfd_new_data("test-state", json, strlen(json));

        assert_true(fd >= 0);
        (void) snprintf(v, sizeof(v), "%d", fd);
        assert_int_equal(setenv(REEXEC_ENV, v, 1), 0);
        return fd;
}

static bool fd_is_open(int fd) {
        return fcntl(fd, F_GETFD) >= 0;
}

static void test_not_reexecuted(void **state) {
        ReexecState s = {};
        char *error = NULL;

        assert_int_equal(unsetenv(REEXEC_ENV), 0);
        assert_int_equal(reexec_state_take(&s, &error), 0);
        assert_null(error);
        assert_int_equal(s.n_listen_fds, 0);
}

static void test_round_trip(void **state) {
        _cleanup_(reexec_state_done) ReexecState s = {};
        char json[1024], *error = NULL;
        int l = listening_socket(), t = secret_fd(TOKEN), k = secret_fd(KEY), d, st;

        d = open("/", O_RDONLY | O_DIRECTORY);          /* a directory fd stands in for a cgroup's */
        assert_true(d >= 0);
        assert_int_equal(fd_cloexec(l, 0), 0);
        (void) snprintf(json, sizeof(json),
                        "{\"listeners\":[{\"fd\":%d,\"tag\":1}],\"tokenFd\":%d,\"signingKeyFd\":%d,"
                        "\"cgroups\":{\"v2\":false,\"description\":\"cgroup v1 (memory, pids) under X\","
                        "\"hierarchies\":[{\"ctrls\":3,\"fd\":%d}]},\"cgroupsReason\":null,"
                        "\"identityError\":\"no user\",\"staleBinary\":\"/x could not be executed\",\"generation\":2}",
                        l, t, k, d);
        st = set_state(json);

        assert_int_equal(reexec_state_take(&s, &error), 1);
        assert_null(error);
        assert_null(getenv(REEXEC_ENV));
        assert_false(fd_is_open(st));           /* the state's memfd is closed */
        assert_false(fd_is_open(t));            /* and so are the secrets' */
        assert_false(fd_is_open(k));
        assert_int_equal(s.n_listen_fds, 1);
        assert_int_equal(s.listen_fds[0], l);
        assert_int_equal(s.listen_tags[0], 1);          /* the dialect it speaks */
        assert_int_equal(fcntl(l, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);  /* not inherited further */
        assert_int_equal(fcntl(d, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        assert_string_equal(s.secrets.token, TOKEN);
        assert_int_equal(s.secrets.signing_key_size, strlen(KEY));
        assert_memory_equal(s.secrets.signing_key, KEY, strlen(KEY));
        assert_non_null(s.cgroups);
        assert_string_equal(cgroup_root_describe(s.cgroups), "cgroup v1 (memory, pids) under X");
        assert_null(s.cgroups_reason);
        assert_string_equal(s.identity_error, "no user");
        assert_string_equal(s.stale_binary, "/x could not be executed");
        assert_int_equal(s.generation, 2);

        /* And back: what the old image exports, the new one imports. */
        struct json_object *o = NULL;
        CgroupRoot *again = NULL;
        assert_int_equal(cgroup_root_export(s.cgroups, &o), 0);
        assert_int_equal(fcntl(d, F_GETFD) & FD_CLOEXEC, 0);            /* left open across execve() */
        assert_int_equal(cgroup_root_import(o, &again), 0);
        assert_string_equal(cgroup_root_describe(again), "cgroup v1 (memory, pids) under X");
        json_object_put(o);
        cgroup_root_free(again);        /* closes d; s.cgroups' close of it then fails harmlessly */
}

static void expect_refused(const char *what, const char *json, const char *msg) {
        _cleanup_(reexec_state_done) ReexecState s = {};
        char *error = NULL;
        int st = set_state(json), r;

        r = reexec_state_take(&s, &error);
        if (r >= 0 || !error || !strstr(error, msg))
                fail_msg("%s: got %d, '%s', wanted an error with '%s'", what, r, error ?: "(none)", msg);
        assert_false(fd_is_open(st));
        free(error);
}

static void test_refused(void **state) {
        char json[512];
        int notsock = open("/", O_RDONLY | O_DIRECTORY), l, t, k, f;

        expect_refused("not JSON", "[1,", "not a JSON object");
        expect_refused("no listeners", "{\"tokenFd\":5}", "listening sockets");
        expect_refused("empty listeners", "{\"listeners\":[]}", "listening sockets");
        expect_refused("fd 1", "{\"listeners\":[{\"fd\":1}]}", "listening sockets");
        expect_refused("a closed fd", "{\"listeners\":[{\"fd\":999}]}", "Bad file descriptor");
        (void) snprintf(json, sizeof(json), "{\"listeners\":[{\"fd\":%d}]}", notsock);
        expect_refused("a directory as a listener", json, "Bad file descriptor");
        /* Each refusal closes what it had taken: a new listener each time. */
        l = listening_socket();
        (void) snprintf(json, sizeof(json), "{\"listeners\":[{\"fd\":%d,\"tag\":0}],\"tokenFd\":\"x\"}", l);
        expect_refused("no token fd", json, "the secrets");
        l = listening_socket();
        t = secret_fd("short");
        k = secret_fd(KEY);
        (void) snprintf(json, sizeof(json),
                        "{\"listeners\":[{\"fd\":%d,\"tag\":0}],\"tokenFd\":%d,\"signingKeyFd\":%d,\"generation\":1}", l, t, k);
        expect_refused("a token too short", json, "the secrets");
        l = listening_socket();
        t = secret_fd(TOKEN);
        k = secret_fd(KEY);
        (void) snprintf(json, sizeof(json),
                        "{\"listeners\":[{\"fd\":%d,\"tag\":0}],\"tokenFd\":%d,\"signingKeyFd\":%d,\"generation\":0}", l, t, k);
        expect_refused("generation 0", json, "start-up state");
        l = listening_socket();
        t = secret_fd(TOKEN);
        k = secret_fd(KEY);
        f = secret_fd("a regular file");
        (void) snprintf(json, sizeof(json),
                        "{\"listeners\":[{\"fd\":%d,\"tag\":0}],\"tokenFd\":%d,\"signingKeyFd\":%d,\"generation\":1,"
                        "\"cgroups\":{\"v2\":true,\"description\":\"d\",\"hierarchies\":[{\"ctrls\":3,\"fd\":%d}]}}",
                        l, t, k, f);
        expect_refused("a cgroup fd that is no directory", json, "the cgroups");

        assert_int_equal(setenv(REEXEC_ENV, "12x", 1), 0);
        ReexecState s = {};
        char *error = NULL;
        assert_int_equal(reexec_state_take(&s, &error), -EINVAL);
        assert_non_null(strstr(error, "is no file descriptor"));
        free(error);
        close(notsock);
        close(f);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_not_reexecuted),
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_refused),
        };

        return cmocka_run_group_tests_name("reexec", tests, NULL, NULL);
}
