/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kernel-run KEEPER: the kernel core against the real pieces, without the HTTP side (issue 22,
 * part 1). It builds a real Manager (temporary state and runtime directories; as root it becomes
 * the sandbox user first, as sandbox-runnerd does), enables [Kernels], and drives one kernel
 * through the KernelManager from inside the Manager's loop: start in the sandbox shape of
 * /execute, readiness, "x = 1; print(x+1)" over the wire, state kept, the sandbox's identity and
 * environment, the cap, interrupt, restart, the model, delete. TAP on stdout.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/manager.h"
#include "daemon/privileges.h"
#include "kernel/kernel.h"
#include "util/fs-util.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strv.h"
#include "util/time-util.h"
#include "workspace/workspace.h"

#define STEP_TIMEOUT_USEC (180 * USEC_PER_SEC)

typedef struct Test {
        Manager *m;
        Kernel *k;
        KernelClient *c;
        char *kernel_id, *kernel_dir, *workspace_id;
        unsigned step, n, failed;
        uint64_t step_start;
        /* the execute_request in flight */
        char msg_id[64];
        char out[4096];
        size_t out_len;
        char status[32], ename[64];
        bool replied, idle, closed, saw_dead;
        unsigned phase;                  /* the ends: 0 crash, 1 cull, 2 lifetime */
        KernelEndReason closed_reason;
} Test;

static void check(Test *t, bool ok, const char *fmt, ...) {
        char line[1024];
        va_list ap;

        t->n++;
        if (!ok)
                t->failed++;
        va_start(ap, fmt);
        (void) vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        /* one TAP line: the kernel's output shows its newlines as \n */
        printf("%s %u - ", ok ? "ok" : "not ok", t->n);
        for (const char *p = line; *p; p++)
                if (*p == '\n')
                        fputs("\\n", stdout);
                else
                        putchar(*p);
        printf("\n");
        fflush(stdout);
}

static const char *str_of(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) ?
                json_object_get_string(v) : NULL;
}

static void on_deliver(KernelClient *c, JupyterMsg *m, void *userdata) {
        Test *t = userdata;
        const char *type = jupyter_msg_type(m), *parent = jupyter_msg_parent_id(m);

        if (streq(type, "status") && streq(str_of(m->content, "execution_state") ?: "", "dead"))
                t->saw_dead = true;
        if (parent && streq(parent, t->msg_id)) {
                if (streq(type, "stream") && streq(str_of(m->content, "name") ?: "", "stdout")) {
                        strncat(t->out, str_of(m->content, "text") ?: "", sizeof(t->out) - strlen(t->out) - 1);
                        t->out_len += strlen(str_of(m->content, "text") ?: "");
                }
                else if (streq(type, "execute_reply")) {
                        snprintf(t->status, sizeof(t->status), "%s", str_of(m->content, "status") ?: "?");
                        snprintf(t->ename, sizeof(t->ename), "%s", str_of(m->content, "ename") ?: "");
                        t->replied = true;
                } else if (streq(type, "status") && streq(str_of(m->content, "execution_state") ?: "", "idle"))
                        t->idle = true;
        }
        jupyter_msg_free(m);
}

static void on_closed(KernelClient *c, KernelEndReason reason, void *userdata) {
        Test *t = userdata;

        t->closed = true;
        t->closed_reason = reason;
        kernel_detach(c);
        t->c = NULL;
}

static int execute(Test *t, const char *code) {
        _cleanup_(json_object_putp) json_object *content = json_object_new_object();
        JupyterMsg *m = NULL;
        int r;

        if (!content || json_add(content, "code", json_object_new_string(code)) < 0 ||
            json_add(content, "silent", json_object_new_boolean(false)) < 0 ||
            json_add(content, "store_history", json_object_new_boolean(true)) < 0 ||
            json_add(content, "user_expressions", json_object_new_object()) < 0 ||
            json_add(content, "allow_stdin", json_object_new_boolean(false)) < 0 ||
            json_add(content, "stop_on_error", json_object_new_boolean(true)) < 0)
                return -ENOMEM;
        r = jupyter_msg_new(JUPYTER_CHANNEL_SHELL, "execute_request", "kernel-run", NULL, STEAL(content), &m);
        if (r < 0)
                return r;
        snprintf(t->msg_id, sizeof(t->msg_id), "%s", jupyter_msg_id(m));
        t->out[0] = t->status[0] = t->ename[0] = '\0';
        t->out_len = 0;
        t->replied = t->idle = false;
        return kernel_client_send(t->c, m);
}

/* What DocsGPT's put_file sends: about 4.2 MB of code in one message. */
static int execute_big(Test *t) {
        _cleanup_free_ char *code = malloc(4200000 + 64);

        if (!code)
                return -ENOMEM;
        strcpy(code, "s = '");
        memset(code + 5, 'a', 4200000);
        strcpy(code + 5 + 4200000, "'; print(len(s))");
        return execute(t, code);
}

static bool executed(Test *t) {
        return t->replied && t->idle;
}

static bool dir_exists(const char *p) {
        struct stat st;

        return p && stat(p, &st) == 0;
}

static void next_step(Test *t) {
        t->step++;
        t->step_start = now_usec(CLOCK_MONOTONIC);
}

static void finish(Test *t) {
        printf("1..%u\n", t->n);
        fflush(stdout);
        (void) sd_event_exit(t->m->event, t->failed > 0 ? 1 : 0);
}

static void step_start(Test *t) {
        _cleanup_free_ char *error = NULL, *conn = NULL;
        _cleanup_(json_object_putp) json_object *network = json_object_new_string("none");
        KernelStartRequest req = { .owner = "test", .network = network };
        struct stat st;
        Kernel *other = NULL;
        int r;

        check(t, t->m->kernels != NULL, "the Manager made a KernelManager ([Kernels] Enable=yes): %s",
              t->m->kernels_error ?: "ok");
        if (!t->m->kernels)
                return finish(t);
        r = kernel_manager_start(t->m->kernels, &req, &t->k, &error);
        check(t, r == 0, "kernel_manager_start(): %s", r < 0 ? (error ?: strerror(-r)) : "started");
        if (r < 0)
                return finish(t);
        t->kernel_id = strdup(kernel_id(t->k));
        check(t, kernel_state(t->k) == KERNEL_STARTING, "a new kernel is starting");
        check(t, kernel_manager_count(t->m->kernels) == 1, "it is counted at once");
        check(t, t->m->busy >= 1, "it keeps the daemon from idle-exiting (busy %u)", t->m->busy);
        r = asprintf(&t->kernel_dir, "%s/kernels/%s", t->m->runtime_dir, t->kernel_id);
        r = asprintf(&conn, "%s/connection.json", t->kernel_dir);
        check(t, r > 0 && stat(conn, &st) == 0 && (st.st_mode & 07777) == 0600,
              "its connection file exists, mode 0600");
        /* MaxKernels=1: the second is refused at request time */
        free(error);
        error = NULL;
        r = kernel_manager_start(t->m->kernels, &req, &other, &error);
        check(t, r == -EUSERS, "a second kernel is refused at the cap (%s)", error ?: strerror(-r));
        check(t, kernel_manager_start(t->m->kernels, &(KernelStartRequest) { .spec = "nope" }, &other, NULL) == -ENOENT,
              "an unknown kernelspec is refused");
        next_step(t);
}

static void step_ready(Test *t) {
        if (kernel_state(t->k) == KERNEL_DEAD) {
                check(t, false, "the kernel got ready (it died: %s)", kernel_end_reason_to_string(kernel_end_reason(t->k)));
                return finish(t);
        }
        if (kernel_state(t->k) != KERNEL_IDLE)
                return;
        check(t, true, "the kernel got ready in its sandbox (%.1f s)",
              (double) (now_usec(CLOCK_MONOTONIC) - t->step_start) / USEC_PER_SEC);
        check(t, kernel_attach(t->k, &(KernelClientOps) { .deliver = on_deliver, .closed = on_closed }, t, &t->c) == 0,
              "a client attaches");
        check(t, execute(t, "x = 1; print(x+1)") == 0, "execute_request sent");
        next_step(t);
}

/* An execution's checks, once its reply and its idle came. */
static bool step_expect(Test *t, const char *what, const char *out, const char *status, const char *ename,
                        const char *next_code) {
        if (!executed(t))
                return false;
        check(t, streq(t->status, status), "%s: execute_reply status '%s' (want '%s')", what, t->status, status);
        if (out)
                check(t, streq(t->out, out), "%s: stdout '%s' (want '%s')", what, t->out, out);
        if (ename)
                check(t, streq(t->ename, ename), "%s: ename '%s' (want '%s')", what, t->ename, ename);
        if (next_code)
                check(t, execute(t, next_code) == 0, "next execute_request sent");
        next_step(t);
        return true;
}

static void step_restart_wait(Test *t) {
        if (kernel_state(t->k) != KERNEL_IDLE)
                return;
        check(t, true, "restarted kernel is ready again, same id");
        check(t, execute(t, "print('x' in dir())") == 0, "execute_request sent after the restart");
        next_step(t);
}

static void step_delete(Test *t) {
        _cleanup_(json_object_putp) json_object *model = kernel_model(t->k), *list = NULL;
        const char *la = str_of(model, "last_activity");
        char *ws;

        check(t, la && strlen(la) == 27 && la[19] == '.' && la[26] == 'Z', "model: last_activity '%s' is %%Y-%%m-%%dT%%H:%%M:%%S.%%fZ",
              la ?: "(none)");
        check(t, streq(str_of(model, "execution_state") ?: "", "idle"), "model: execution_state idle");
        check(t, streq(str_of(model, "id") ?: "", t->kernel_id), "model: the id");
        ws = (char *) str_of(model, "workspaceId");
        t->workspace_id = ws ? strdup(ws) : NULL;
        list = kernel_manager_list(t->m->kernels, "test");
        check(t, list && json_object_array_length(list) == 1, "listed for its owner");
        json_object_put(list);
        list = kernel_manager_list(t->m->kernels, "someone-else");
        check(t, list && json_object_array_length(list) == 0, "not listed for another owner");
        check(t, !kernel_manager_find(t->m->kernels, "someone-else", t->kernel_id), "not found for another owner");

        check(t, kernel_delete(t->k, KERNEL_END_DELETED) == 0, "kernel_delete()");
        t->k = NULL;
        check(t, t->closed && t->closed_reason == KERNEL_END_DELETED, "the client was closed, reason deleted");
        check(t, !kernel_manager_find(t->m->kernels, NULL, t->kernel_id), "the kernel is gone from the manager");
        check(t, kernel_manager_count(t->m->kernels) == 0, "the count is back to 0");
        check(t, !dir_exists(t->kernel_dir), "its directory is removed");
        next_step(t);
}

/* The run ends (its keeper, bwrap and sandbox gone): the workspace's lease is free again. */
static void step_lease(Test *t) {
        _cleanup_close_ int fd = -EBADF, lease = -EBADF;

        if (t->m->busy > 0 && now_usec(CLOCK_MONOTONIC) - t->step_start < 30 * USEC_PER_SEC)
                return;
        check(t, t->m->busy == 0, "nothing keeps the daemon busy after the delete (busy %u)", t->m->busy);
        fd = t->workspace_id ? workspace_open(t->m->workspaces_fd, t->workspace_id) : -EINVAL;
        lease = fd >= 0 ? workspace_lease_try(fd) : fd;
        check(t, lease >= 0, "the workspace '%s' is not leased any more", t->workspace_id ?: "?");
        next_step(t);
}

/* The ends a kernel comes to by itself: a crash, idle culling, its lifetime. */
static const struct {
        const char *what;
        uint64_t idle_usec, lifetime_usec;
        const char *code;
        KernelEndReason reason;
} ends[] = {
        { "crash", 0, 0, "import os, sys; os.write(getattr(sys.stdout, '_original_stdstream_copy', 1), b'x' * 1000000); os._exit(3)", KERNEL_END_CRASHED },
        { "idle cull", 1 * USEC_PER_SEC, 0, NULL, KERNEL_END_CULLED },
        { "lifetime", 0, 6 * USEC_PER_SEC, NULL, KERNEL_END_LIFETIME },
};

static void step_end_start(Test *t) {
        _cleanup_free_ char *error = NULL;
        int r;

        if (t->phase >= ELEMENTSOF(ends))
                return finish(t);
        t->m->config.kernels_idle_timeout_usec = ends[t->phase].idle_usec;
        t->m->config.kernels_max_lifetime_usec = ends[t->phase].lifetime_usec;
        r = kernel_manager_start(t->m->kernels, &(KernelStartRequest) { .owner = "test" }, &t->k, &error);
        check(t, r == 0, "%s: a new kernel: %s", ends[t->phase].what, r < 0 ? (error ?: strerror(-r)) : "started");
        if (r < 0)
                return finish(t);
        t->closed = t->saw_dead = false;
        r = kernel_attach(t->k, &(KernelClientOps) { .deliver = on_deliver, .closed = on_closed }, t, &t->c);
        check(t, r == 0, "%s: a client attaches", ends[t->phase].what);
        next_step(t);
}

static void step_end_wait(Test *t) {
        _cleanup_(json_object_putp) json_object *model = NULL;
        KernelEndReason want = ends[t->phase].reason;

        if (ends[t->phase].code && kernel_state(t->k) == KERNEL_IDLE && t->msg_id[0] == '\0') {
                check(t, execute(t, ends[t->phase].code) == 0, "%s: '%s' sent", ends[t->phase].what,
                      ends[t->phase].code);
                return;
        }
        if (kernel_state(t->k) != KERNEL_DEAD)
                return;
        check(t, kernel_end_reason(t->k) == want, "%s: the kernel is dead, reason %s (want %s)", ends[t->phase].what,
              kernel_end_reason_to_string(kernel_end_reason(t->k)), kernel_end_reason_to_string(want));
        check(t, t->saw_dead && t->closed && t->closed_reason == want,
              "%s: its client got status dead on iopub, then closed with the reason", ends[t->phase].what);
        model = kernel_model(t->k);
        check(t, streq(str_of(model, "execution_state") ?: "", "dead") &&
                 streq(str_of(model, "reason") ?: "", kernel_end_reason_to_string(want)),
              "%s: the model says dead and why", ends[t->phase].what);
        check(t, kernel_manager_count(t->m->kernels) == 0, "%s: no longer counted", ends[t->phase].what);
        check(t, kernel_manager_find(t->m->kernels, "test", kernel_id(t->k)) == t->k,
              "%s: still listed, with its reason", ends[t->phase].what);
        check(t, kernel_attach(t->k, &(KernelClientOps) { .deliver = on_deliver, .closed = on_closed }, t, &t->c) ==
                 -ESHUTDOWN, "%s: a dead kernel takes no client", ends[t->phase].what);
        check(t, kernel_interrupt(t->k) == -ESHUTDOWN && kernel_restart(t->k) == -ESHUTDOWN,
              "%s: nor an interrupt or a restart", ends[t->phase].what);
        if (want == KERNEL_END_CRASHED) {
                /* Its 1 MB straight to fd 1: the daemon kept a bounded head and tail of it. */
                _cleanup_free_ char *id = NULL;
                _cleanup_(json_object_putp) json_object *o = NULL;
                Execution *e;
                json_object *v;

                (void) asprintf(&id, "kernel-%s-1", kernel_id(t->k));
                e = id ? execution_find(&t->m->exec, id) : NULL;
                o = e ? execution_to_json(e) : NULL;
                v = NULL;
                check(t, o && json_object_object_get_ex(o, "stdoutBytes", &v) && json_object_get_int64(v) >= 1000000,
                      "%s: the kernel's own stdout had its 1 MB (%s)", ends[t->phase].what,
                      v ? json_object_get_string(v) : "no run");
                check(t, o && json_object_object_get_ex(o, "stdout", &v) && json_object_get_string_len(v) < 70000,
                      "%s: at most 64K of it are kept", ends[t->phase].what);
        }
        check(t, kernel_delete(t->k, KERNEL_END_DELETED) == 0, "%s: deleted", ends[t->phase].what);
        t->k = NULL;
        t->msg_id[0] = '\0';
        t->phase++;
        t->step--;                        /* the next end, from its start */
        t->step_start = now_usec(CLOCK_MONOTONIC);
}

static int on_poll(sd_event_source *s, uint64_t usec, void *userdata) {
        Test *t = userdata;

        if (t->step > 0 && now_usec(CLOCK_MONOTONIC) - t->step_start > STEP_TIMEOUT_USEC) {
                check(t, false, "step %u finished in time", t->step);
                finish(t);
                return 0;
        }
        switch (t->step) {
        case 0:
                step_start(t);
                break;
        case 1:
                step_ready(t);
                break;
        case 2:
                (void) step_expect(t, "x = 1; print(x+1)", "2\n", "ok", NULL, "print(x * 10)");
                break;
        case 3:
                (void) step_expect(t, "state kept", "10\n", "ok", NULL,
                                   "import os; print(os.getuid(), 'STATE_DIRECTORY' in os.environ, "
                                   "'RUNTIME_DIRECTORY' in os.environ, os.getcwd(), os.access('/tmp', os.W_OK))");
                break;
        case 4:
                (void) step_expect(t, "sandbox shape", "1000 False False /workspace True\n", "ok", NULL,
                                   "print('y' * 14000000)");
                break;
        case 5:
                if (step_expect(t, "a 14 MB stream message", NULL, "ok", NULL, NULL)) {
                        check(t, t->out_len == 14000001, "a 14 MB stream message: %zu bytes of stdout arrived (want 14000001)",
                              t->out_len);
                        check(t, execute_big(t) == 0, "a 4.2 MB execute_request sent");
                }
                break;
        case 6:
                (void) step_expect(t, "a 4.2 MB execute_request", "4200000\n", "ok", NULL,
                                   "import time; time.sleep(600)");
                break;
        case 7:
        case 12:
                /* busy in the sleep: interrupt it */
                if (kernel_state(t->k) != KERNEL_BUSY || now_usec(CLOCK_MONOTONIC) - t->step_start < USEC_PER_SEC)
                        return sd_event_source_set_time_relative(s, 50 * USEC_PER_MSEC) >= 0 ?
                               sd_event_source_set_enabled(s, SD_EVENT_ONESHOT) : 0;
                check(t, kernel_interrupt(t->k) == 0, "kernel_interrupt() of a busy kernel%s",
                      t->step == 12 ? " that ignores interrupt_request" : "");
                next_step(t);
                break;
        case 8:
                if (step_expect(t, "interrupted sleep", NULL, "error", "KeyboardInterrupt", NULL)) {
                        check(t, kernel_restart(t->k) == 0, "kernel_restart()");
                        check(t, kernel_state(t->k) == KERNEL_RESTARTING, "restarting");
                }
                break;
        case 9:
                step_restart_wait(t);
                break;
        case 10:
                (void) step_expect(t, "after the restart", "False\n", "ok", NULL,
                                   "get_ipython().kernel.control_handlers['interrupt_request'] = lambda *a, **k: None");
                break;
        case 11:
                /* the kernel no longer answers interrupt_request: the daemon falls back to SIGINT */
                (void) step_expect(t, "interrupt_request ignored from now on", "", "ok", NULL,
                                   "import time; time.sleep(600)");
                break;
        case 13:
                (void) step_expect(t, "sleep interrupted by SIGINT", NULL, "error", "KeyboardInterrupt", NULL);
                break;
        case 14:
                step_delete(t);
                break;
        case 15:
                step_lease(t);
                break;
        case 16:
                t->msg_id[0] = '\0';
                step_end_start(t);
                break;
        case 17:
                step_end_wait(t);
                break;
        default:
                return 0;
        }
        if (t->step <= 17)
                (void) sd_event_source_set_time_relative(s, 50 * USEC_PER_MSEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static uint64_t no_body(HttpRequest *req, void *userdata) {
        return 0;
}

static void no_dispatch(HttpRequest *req, void *userdata) {
}

/* As root, become the sandbox user with the work directory, as sandbox-runnerd does. */
static int drop_root(Config *config, const char *work) {
        _cleanup_free_ char *reason = NULL;
        Identity id = {};
        int r;

        if (geteuid() != 0)
                return 0;
        r = identity_resolve(config->sandbox_user, &id, &reason);
        if (r >= 0)
                r = privileges_own_tree(work, NULL, &id);
        if (r >= 0)
                r = privileges_drop(&id);
        identity_done(&id);
        return r;
}

int main(int argc, char *argv[]) {
        _cleanup_free_ char *state = NULL, *runtime = NULL;
        char work[] = "/tmp/sr-krun.XXXXXX";
        sd_event_source *poll = NULL;
        Manager *m = NULL;
        Secrets secrets = {};
        Config config;
        Test t = {};
        int r;

        if (argc != 2) {
                fprintf(stderr, "usage: kernel-run SANDBOX-RUNNER-KEEPER\n");
                return 2;
        }
        log_setup(LOG_TARGET_CONSOLE);
        if (!mkdtemp(work) || chmod(work, 0755) < 0 || asprintf(&state, "%s/state", work) < 0 ||
            asprintf(&runtime, "%s/run", work) < 0 || mkdir(state, 0700) < 0 || mkdir(runtime, 0755) < 0) {
                printf("Bail out! cannot make a work directory: %m\n");
                return 1;
        }
        /* The Manager's directories; the kernel must not see these variables. */
        setenv("STATE_DIRECTORY", state, 1);
        setenv("RUNTIME_DIRECTORY", runtime, 1);
        if (config_init(&config) < 0)
                return 1;
        config.kernels_enable = true;
        config.kernels_max = 1;
        config.allow_unscoped = true;          /* no systemd here: the daemon's cgroup or rlimits */
        config.env_bootstrap = strv_free(config.env_bootstrap);   /* no environment set-up meanwhile */
        r = drop_root(&config, work);
        if (r < 0) {
                printf("Bail out! cannot become the sandbox user '%s': %s\n", config.sandbox_user, strerror(-r));
                return 1;
        }
        r = manager_new(&config, &secrets, &(const HttpServerCallbacks) { .begin = no_body, .dispatch = no_dispatch }, &m);
        if (r < 0) {
                printf("Bail out! manager_new(): %s\n", strerror(-r));
                return 1;
        }
        m->keeper_path = strdup(argv[1]);
        r = manager_probe(m);
        if (r >= 0)
                r = manager_setup_egress(m);
        if (r < 0 || !m->probe.usable) {
                printf("Bail out! no sandbox here: %s\n", m->probe.reason ?: strerror(-r));
                manager_free(m);
                return 1;
        }
        t.m = m;
        r = sd_event_add_time_relative(m->event, &poll, CLOCK_MONOTONIC, 0, USEC_PER_MSEC, on_poll, &t);
        if (r >= 0)
                r = manager_run(m);
        if (r >= 0 && sd_event_get_exit_code(m->event, &r) < 0)
                r = 1;
        sd_event_source_disable_unref(poll);
        manager_free(m);
        (void) rm_rf_at(AT_FDCWD, work);
        free(t.kernel_id);
        free(t.kernel_dir);
        free(t.workspace_id);
        return r == 0 && t.failed == 0 && t.n > 0 ? 0 : 1;
}
