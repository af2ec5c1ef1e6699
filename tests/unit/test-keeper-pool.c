/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pool of keepers started ahead (src/execution/keeper-pool.c), with the real sandbox-runner-keeper: it
 * fills up from the event loop, hands out live keepers only (a ready one that died is skipped),
 * reaps a ready one that dies as soon as the loop sees it (no zombie while idle) without starting
 * keepers over and over that die at once, starts one at once when none is ready, and stops what
 * it holds when freed.
 */

#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "execution/keeper-pool.h"
#include "util/macro.h"

typedef struct Fixture {
        sd_event *e;
        KeeperPool *p;
} Fixture;

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        assert_int_equal(sd_event_new(&f->e), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;

        keeper_pool_free(f->p);
        sd_event_unref(f->e);
        free(f);
        return 0;
}

/* The fixture's pool of @target keepers. */
static KeeperPool *pool(Fixture *f, unsigned target) {
        assert_int_equal(keeper_pool_new(f->e, SR_KEEPER_PATH, target, &f->p), 0);
        return f->p;
}

/* Run the loop until @p has @want keepers ready; 10 s at most. */
static void wait_ready(sd_event *e, KeeperPool *p, unsigned want) {
        for (unsigned i = 0; i < 1000 && keeper_pool_ready(p) < want; i++)
                assert_true(sd_event_run(e, 10 * 1000) >= 0);
        assert_int_equal(keeper_pool_ready(p), want);
}

/* A pidfd of @pid, to tell later whether it was reaped (pids are reused, pidfds not). */
static int pidfd_of(pid_t pid) {
        int fd = (int) syscall(SYS_pidfd_open, pid, 0);

        assert_true(fd >= 0);
        return fd;
}

/* Exited and reaped (by the pool): no longer a child of ours. Closes @pidfd. */
static bool reaped(int pidfd) {
        siginfo_t si = {};
        bool r = waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD;

        (void) close(pidfd);
        return r;
}

static bool is_our_child(pid_t pid) {
        siginfo_t si = {};

        return waitid(P_PID, (id_t) pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0;
}

static void test_fills_and_refills(void **state) {
        Fixture *f = *state;
        sd_event *e = f->e;
        KeeperPool *p;
        SandboxKeeper k = SANDBOX_KEEPER_NULL;

        p = pool(f, 2);
        wait_ready(e, p, 2);

        assert_int_equal(keeper_pool_take(p, &k), 0);
        assert_true(sandbox_keeper_alive(&k));
        assert_true(is_our_child(k.pid));
        assert_int_equal(keeper_pool_ready(p), 1);
        /* Not replaced until asked (the loop may be waiting for systemd for this run) ... */
        for (unsigned i = 0; i < 20; i++)
                assert_true(sd_event_run(e, 5 * 1000) >= 0);
        assert_int_equal(keeper_pool_ready(p), 1);
        /* ... then by the loop. */
        keeper_pool_refill(p);
        wait_ready(e, p, 2);
        sandbox_keeper_stop(&k);
        assert_false(sandbox_keeper_alive(&k));

        /* Taking the last one asks for more at once (more runs starting than ready). */
        {
                SandboxKeeper a = SANDBOX_KEEPER_NULL, b = SANDBOX_KEEPER_NULL;
                assert_int_equal(keeper_pool_take(p, &a), 0);
                assert_int_equal(keeper_pool_take(p, &b), 0);
                assert_int_equal(keeper_pool_ready(p), 0);
                wait_ready(e, p, 2);
                sandbox_keeper_stop(&a);
                sandbox_keeper_stop(&b);
        }

}

/* Our children (any thread's), up to @max, from /proc. */
static size_t our_children(pid_t *ret, size_t max) {
        char path[320];
        size_t n = 0;
        DIR *d = opendir("/proc/self/task");
        struct dirent *de;

        assert_non_null(d);
        while ((de = readdir(d))) {
                FILE *f;
                int pid;

                if (de->d_name[0] == '.')
                        continue;
                (void) snprintf(path, sizeof(path), "/proc/self/task/%s/children", de->d_name);
                f = fopen(path, "re");
                if (!f)
                        continue;
                while (n < max && fscanf(f, "%d", &pid) == 1)
                        ret[n++] = (pid_t) pid;
                fclose(f);
        }
        closedir(d);
        return n;
}

static void test_skips_dead_keepers(void **state) {
        Fixture *f = *state;
        sd_event *e = f->e;
        KeeperPool *p;
        SandboxKeeper k = SANDBOX_KEEPER_NULL;
        pid_t ready[8];
        size_t n;

        int fds[8];

        p = pool(f, 2);
        wait_ready(e, p, 2);
        /* Both ready keepers die while they wait (killed from outside), and the loop does not
         * look before the next take. */
        n = our_children(ready, ELEMENTSOF(ready));
        assert_int_equal(n, 2);
        for (size_t i = 0; i < n; i++) {
                fds[i] = pidfd_of(ready[i]);
                assert_int_equal(kill(ready[i], SIGKILL), 0);
        }
        for (size_t i = 0; i < n; i++) {
                siginfo_t si = {};
                assert_int_equal(waitid(P_PIDFD, (id_t) fds[i], &si, WEXITED | WNOWAIT), 0);
        }
        /* Neither is handed out: the run gets a live one, started at once ... */
        assert_int_equal(keeper_pool_take(p, &k), 0);
        assert_true(sandbox_keeper_alive(&k));
        /* ... and the dead ones were reaped on the way. */
        for (size_t i = 0; i < n; i++)
                assert_true(reaped(fds[i]));
        sandbox_keeper_stop(&k);
}

/* Nothing is pending in the loop: in particular no refill (an idle source would run at once). */
static void assert_loop_idle(sd_event *e) {
        assert_int_equal(sd_event_run(e, 0), 0);
}

static bool have_children(void) {
        siginfo_t si = {};

        return !(waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD);
}

/* Run the loop until the pool has none ready and we have no child left, not even a zombie; 10 s. */
static void run_until_no_children(sd_event *e, KeeperPool *p) {
        for (unsigned i = 0; i < 1000 && (keeper_pool_ready(p) > 0 || have_children()); i++)
                assert_true(sd_event_run(e, 10 * 1000) >= 0);
        assert_int_equal(keeper_pool_ready(p), 0);
        assert_false(have_children());
}

static void test_reaps_keepers_that_die_waiting(void **state) {
        Fixture *f = *state;
        sd_event *e = f->e;
        KeeperPool *p;
        SandboxKeeper k = SANDBOX_KEEPER_NULL;
        pid_t ready[8];
        int fd;

        p = pool(f, 2);
        wait_ready(e, p, 2);
        assert_int_equal(our_children(ready, ELEMENTSOF(ready)), 2);
        fd = pidfd_of(ready[0]);
        assert_int_equal(kill(ready[0], SIGKILL), 0);
        /* The loop sees it die and reaps it: the pool is one short, and holds no zombie. */
        for (unsigned i = 0; i < 1000 && keeper_pool_ready(p) == 2; i++)
                assert_true(sd_event_run(e, 10 * 1000) >= 0);
        assert_int_equal(keeper_pool_ready(p), 1);
        assert_true(reaped(fd));
        /* Not replaced until a run asks (see below) ... */
        assert_loop_idle(e);
        assert_int_equal(keeper_pool_ready(p), 1);
        /* ... then the run gets the other one, and the pool fills up again. */
        assert_int_equal(keeper_pool_take(p, &k), 0);
        assert_int_equal(k.pid, ready[1]);
        assert_true(sandbox_keeper_alive(&k));
        wait_ready(e, p, 2);
        sandbox_keeper_stop(&k);
}

/* A "keeper" that exits as soon as it starts (a broken install): the pool reaps each, does not
 * start them over and over, and leaves no zombie. */
static void test_keepers_that_die_at_once(void **state) {
        Fixture *f = *state;
        sd_event *e = f->e;
        KeeperPool *p;
        SandboxKeeper k = SANDBOX_KEEPER_NULL;

        assert_int_equal(keeper_pool_new(e, "/bin/false", 2, &f->p), 0);
        p = f->p;
        /* The refill starts one (the only source pending: it runs first) ... */
        assert_int_equal(sd_event_run(e, 0), 1);
        assert_int_equal(keeper_pool_ready(p), 1);
        /* ... maybe another; each dies and is reaped: we have no child, not even a zombie ... */
        run_until_no_children(e, p);
        /* ... and no more are started (a pool that restarted them would have its refill pending). */
        assert_loop_idle(e);
        assert_false(have_children());
        /* A take still gets a keeper started for it (its run sees it fail), and asks for more: the
         * same again. */
        assert_int_equal(keeper_pool_take(p, &k), 0);
        sandbox_keeper_stop(&k);
        assert_int_equal(sd_event_run(e, 0), 1);
        assert_int_equal(keeper_pool_ready(p), 1);
        run_until_no_children(e, p);
        assert_loop_idle(e);
        assert_false(have_children());
}

static void test_none_ready_starts_one_now(void **state) {
        KeeperPool *p = pool(*state, 0);
        SandboxKeeper k = SANDBOX_KEEPER_NULL;

        assert_int_equal(keeper_pool_ready(p), 0);
        assert_int_equal(keeper_pool_take(p, &k), 0);
        assert_true(sandbox_keeper_alive(&k));
        sandbox_keeper_stop(&k);
}

static void test_free_stops_the_ready_ones(void **state) {
        Fixture *f = *state;
        sd_event *e = f->e;
        KeeperPool *p;
        pid_t kids[8];

        p = pool(f, 2);
        wait_ready(e, p, 2);
        assert_int_equal(our_children(kids, ELEMENTSOF(kids)), 2);
        f->p = keeper_pool_free(p);
        /* Everything the pool started is gone and reaped: we have no children left. */
        assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
}

static void test_missing_binary(void **state) {
        SandboxKeeper k = SANDBOX_KEEPER_NULL;

        assert_int_equal(sandbox_keeper_start("/nonexistent/sandbox-runner-keeper", &k), -ENOENT);
        assert_int_equal(sandbox_keeper_start(NULL, &k), -ENOENT);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_fills_and_refills, setup, teardown),
                cmocka_unit_test_setup_teardown(test_skips_dead_keepers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reaps_keepers_that_die_waiting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_keepers_that_die_at_once, setup, teardown),
                cmocka_unit_test_setup_teardown(test_none_ready_starts_one_now, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_stops_the_ready_ones, setup, teardown),
                cmocka_unit_test(test_missing_binary),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
