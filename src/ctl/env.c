/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Managed scientific environments: env list, show, create, install, remove, revisions and setup
 * (GET/PUT/DELETE /environments/{name}, GET .../revisions, GET /environments/setup, POST
 * /environments/setup/retry), and following a setup with a progress line. Requests go through
 * request.c; the bodies, the progress lines and the redrawing are env-util.c's; it calls
 * output.c and transfer.c for escaping.
 */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "env-util.h"
#include "output.h"
#include "transfer.h"
#include "util/time-util.h"

#define ENV_POLL_USEC (500 * USEC_PER_MSEC)
#define ENV_SETUP_PATH "/environments/setup"

/* Which options of env a subcommand takes. */
typedef enum EnvOptions {
        ENV_OPT_CREATE = 1 << 0,        /* --kind, --index-url, --preset, --offline, --channel */
        ENV_OPT_WHEEL = 1 << 1,
        ENV_OPT_WAIT = 1 << 2,
        ENV_OPT_RETRY = 1 << 3,
        ENV_OPT_FOLLOW = 1 << 4,
} EnvOptions;

/* "/environments/<name><suffix>", the name escaped. NULL on OOM (reported). */
static char *env_path(const char *name, const char *suffix) {
        _cleanup_free_ char *e = NULL;
        char *p;

        if (transfer_escape(name, &e) < 0 || asprintf(&p, "/environments/%s%s", e, suffix ?: "") < 0) {
                (void) log_oom();
                return NULL;
        }
        return p;
}

static size_t list_length(json_object *o, const char *key) {
        json_object *l = json_array_field(o, key);

        return l ? json_object_array_length(l) : 0;
}

/* The widest @key of the objects in @list, at least @min. */
static size_t column_width(json_object *list, const char *key, size_t min) {
        size_t w = min;

        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                const char *s = json_string_field(json_object_array_get_idx(list, i), key);

                w = MAX(w, s ? strlen(s) : 1);
        }
        return MIN(w, (size_t) 64);
}

/* ---- list, show, revisions --------------------------------------------------------------------- */

static int print_list(json_object *answer) {
        json_object *list = json_array_field(answer, "environments");
        size_t w;

        if (!list) {
                log_error("The answer has no 'environments' list.");
                return CTL_EXIT_FAILURE;
        }
        w = column_width(list, "name", strlen("NAME"));
        printf("%-*s  %-6s  %-4s  %-8s  %8s  %8s\n", (int) w, "NAME", "KIND", "BASE", "STATE", "REVISION", "PACKAGES");
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *e = json_object_array_get_idx(list, i);
                _cleanup_free_ char *name = output_escaped(json_string_field(e, "name") ?: "?"),
                                    *kind = output_escaped(json_string_field(e, "kind") ?: "?"),
                                    *state = output_escaped(json_string_field(e, "state") ?: "?");
                int64_t rev = json_int_field(e, "revision", 0);
                char revision[24] = "-";

                if (!name || !kind || !state)
                        return log_oom();
                if (rev > 0)
                        (void) snprintf(revision, sizeof(revision), "%" PRIi64, rev);
                printf("%-*s  %-6s  %-4s  %-8s  %8s  %8zu\n", (int) w, name, kind,
                       json_bool_field(e, "base") ? "yes" : "no", state, revision, list_length(e, "packages"));
        }
        return flush_stdout();
}

/* "key:" padded, then @value escaped ("-" for NULL). */
static int print_field(const char *key, const char *value) {
        _cleanup_free_ char *e = output_escaped(value ?: "-");

        if (!e)
                return -ENOMEM;
        printf("%-10s %s\n", key, e);
        return 0;
}

/* The strings of the list @key of @o, comma-separated, or "(none)". */
static int print_strings(const char *label, json_object *o, const char *key) {
        printf("%-10s ", label);
        return print_string_list(json_array_field(o, key));
}

/* Lines "  A  B  C..." for each object of the list @key of @o, with the fields @fields. */
static int print_rows(json_object *o, const char *key, const char *indent, const char *const *fields) {
        json_object *l = json_array_field(o, key);

        for (size_t i = 0; l && i < json_object_array_length(l); i++) {
                json_object *e = json_object_array_get_idx(l, i);

                fputs(indent, stdout);
                for (const char *const *f = fields; *f; f++) {
                        _cleanup_free_ char *v = output_escaped(json_string_field(e, *f) ?: "-");

                        if (!v)
                                return -ENOMEM;
                        printf("%s%s", f == fields ? "" : "  ", v);
                }
                printf("\n");
        }
        return 0;
}

static int print_env(json_object *e) {
        static const char *const package_fields[] = { "name", "version", NULL };
        static const char *const wheel_fields[] = { "sha256", "file", NULL };
        json_object *source = NULL;
        int64_t rev = json_int_field(e, "revision", 0);
        char revision[24] = "- (none yet)";
        bool has_source = json_object_object_get_ex(e, "source", &source) &&
                          json_object_is_type(source, json_type_object);

        if (rev > 0)
                (void) snprintf(revision, sizeof(revision), "%" PRIi64, rev);
        if (print_field("name:", json_string_field(e, "name")) < 0 ||
            print_field("kind:", json_string_field(e, "kind")) < 0 ||
            print_field("base:", json_bool_field(e, "base") ? "yes" : "no") < 0 ||
            print_field("state:", json_string_field(e, "state")) < 0 ||
            print_field("revision:", revision) < 0)
                return log_oom();
        if (json_string_field(e, "displayName") && print_field("shown as:", json_string_field(e, "displayName")) < 0)
                return log_oom();
        if (json_string_field(e, "error") && print_field("error:", json_string_field(e, "error")) < 0)
                return log_oom();
        if (has_source &&
            ((json_string_field(source, "indexUrl") && print_field("index URL:", json_string_field(source, "indexUrl")) < 0) ||
             (json_string_field(source, "preset") && print_field("preset:", json_string_field(source, "preset")) < 0) ||
             print_field("offline:", json_bool_field(source, "offline") ? "yes" : "no") < 0))
                return log_oom();
        if (json_array_field(e, "channels") && print_strings("channels:", e, "channels") < 0)
                return log_oom();
        if (print_strings("requested:", e, "requested") < 0)
                return log_oom();
        printf("%-10s %zu\n", "wheels:", list_length(e, "wheels"));
        if (print_rows(e, "wheels", "  ", wheel_fields) < 0)
                return log_oom();
        printf("%-10s %zu\n", "packages:", list_length(e, "packages"));
        if (print_rows(e, "packages", "  ", package_fields) < 0)
                return log_oom();
        return flush_stdout();
}

/* A revision's "createdAt" (milliseconds since the epoch) as RFC 3339 UTC, or "-". */
static char *created_at(json_object *r) {
        int64_t ms = json_int_field(r, "createdAt", -1);
        char buf[32] = "-";
        struct tm tm;
        time_t t;

        if (ms >= 0) {
                t = (time_t) (ms / 1000);
                if (gmtime_r(&t, &tm))
                        (void) strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
        }
        return strdup(buf);
}

static int print_revisions(json_object *answer) {
        json_object *list = json_array_field(answer, "revisions");

        if (!list) {
                log_error("The answer has no 'revisions' list.");
                return CTL_EXIT_FAILURE;
        }
        printf("%8s  %-20s  %8s  %s\n", "REVISION", "CREATED", "PACKAGES", "PROVISIONER");
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *r = json_object_array_get_idx(list, i);
                _cleanup_free_ char *created = created_at(r),
                                    *prov = output_escaped(json_string_field(r, "provisioner") ?: "-");

                if (!created || !prov)
                        return log_oom();
                printf("%8" PRIi64 "  %-20s  %8zu  %s\n", json_int_field(r, "revision", 0), created,
                       list_length(r, "packages"), prov);
        }
        return flush_stdout();
}

/* -v: each revision followed by its packages. */
static int print_revisions_verbose(json_object *answer) {
        static const char *const package_fields[] = { "name", "version", "sha256", "source", NULL };
        json_object *list = json_array_field(answer, "revisions");

        if (!list) {
                log_error("The answer has no 'revisions' list.");
                return CTL_EXIT_FAILURE;
        }
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *r = json_object_array_get_idx(list, i);
                _cleanup_free_ char *created = created_at(r),
                                    *prov = output_escaped(json_string_field(r, "provisioner") ?: "-"),
                                    *kind = output_escaped(json_string_field(r, "kind") ?: "-");

                if (!created || !prov || !kind)
                        return log_oom();
                printf("%srevision %" PRIi64 "  %s  %s  %s\n", i > 0 ? "\n" : "", json_int_field(r, "revision", 0),
                       created, kind, prov);
                if (print_strings("  requested:", r, "requested") < 0 ||
                    print_rows(r, "packages", "    ", package_fields) < 0)
                        return log_oom();
        }
        return flush_stdout();
}

static int env_list(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        int r;

        r = request_get_unless_json(o, "/environments", &answer);
        if (r != 0 || !answer)
                return r;
        return print_list(answer);
}

/* GET /environments/@name@suffix, as request_get_unless_json(). Returns an exit code. */
static int get_env(const CtlOptions *o, const char *name, const char *suffix, json_object **ret_answer) {
        _cleanup_free_ char *path = env_path(name, suffix);

        if (!path)
                return CTL_EXIT_FAILURE;
        return request_get_unless_json(o, path, ret_answer);
}

static int env_show(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        int r;

        r = get_env(o, argv[0], NULL, &answer);
        if (r != 0 || !answer)
                return r;
        return print_env(answer);
}

static int env_revisions(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        int r;

        r = get_env(o, argv[0], "/revisions", &answer);
        if (r != 0 || !answer)
                return r;
        return o->verbose ? print_revisions_verbose(answer) : print_revisions(answer);
}

/* ---- progress ---------------------------------------------------------------------------------- */

/* What was shown of a setup so far. */
typedef struct Progress {
        bool tty;
        size_t columns;         /* tty: the terminal's width (0: unknown) */
        size_t n_drawn;         /* tty: lines drawn last time */
        json_object *last;      /* not a tty: name → the line printed last */
} Progress;

static void progress_done(Progress *p) {
        json_object_put(p->last);
        p->last = NULL;
}

static void progress_init(Progress *p) {
        struct winsize ws = {};

        *p = (Progress) { .tty = isatty(STDOUT_FILENO) };
        if (p->tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) >= 0)
                p->columns = ws.ws_col;
}

static void free_lines(char **lines, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(lines[i]);
        free(lines);
}

/* Show the progress lines of @entries (setup entries): redrawn on a terminal, else each line
 * printed when it differs from the one printed last for that environment. Returns 0, -ENOMEM, -EIO. */
static int progress_show(Progress *p, json_object *const *entries, size_t n) {
        char **lines = calloc(MAX(n, (size_t) 1), sizeof(char *));
        size_t w = strlen("NAME");
        int r = 0;

        if (!lines)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                w = MAX(w, strlen(json_string_field(entries[i], "name") ?: "?"));
        w = MIN(w, (size_t) 64);
        for (size_t i = 0; i < n && r >= 0; i++)
                r = env_progress_line(entries[i], w, &lines[i]);
        if (r < 0)
                goto finish;

        if (p->tty) {
                r = env_redraw(stdout, p->n_drawn, lines, n, p->columns);
                p->n_drawn = n;
                goto finish;
        }

        if (!p->last && !(p->last = json_object_new_object())) {
                r = -ENOMEM;
                goto finish;
        }
        for (size_t i = 0; i < n; i++) {
                const char *name = json_string_field(entries[i], "name") ?: "?";

                if (streq(json_string_field(p->last, name) ?: "", lines[i]))
                        continue;
                printf("%s\n", lines[i]);
                if (json_object_object_add(p->last, name, json_object_new_string(lines[i])) < 0) {
                        r = -ENOMEM;
                        break;
                }
        }
        if (fflush(stdout) != 0 || ferror(stdout))
                r = -EIO;
finish:
        free_lines(lines, n);
        return r;
}

/* The entries of the "setup" list of @answer, borrowed. */
static json_object **setup_entries(json_object *answer, size_t *ret_n) {
        json_object *l = json_array_field(answer, "setup");
        size_t n = l ? json_object_array_length(l) : 0;
        json_object **e = calloc(MAX(n, (size_t) 1), sizeof(json_object *));

        for (size_t i = 0; e && i < n; i++)
                e[i] = json_object_array_get_idx(l, i);
        *ret_n = n;
        return e;
}

/* Sleep one poll interval, unless @deadline (CLOCK_MONOTONIC, 0: none) is reached. Returns 0, or
 * an exit code when the time is up. */
static int poll_wait(uint64_t deadline) {
        if (deadline > 0 && now_usec(CLOCK_MONOTONIC) + ENV_POLL_USEC > deadline) {
                log_error("Timed out waiting for the setup (--timeout).");
                return CTL_EXIT_FAILURE;
        }
        (void) usleep(ENV_POLL_USEC);
        return 0;
}

static uint64_t poll_deadline(const CtlOptions *o) {
        uint64_t t = ctl_long_timeout(o);

        return t > 0 ? now_usec(CLOCK_MONOTONIC) + t : 0;
}

static int progress_failed(int r) {
        if (r == -ENOMEM)
                return log_oom();
        log_error("Failed to write to standard output: %s", strerror(-r));
        return CTL_EXIT_FAILURE;
}

/* The progress entry of environment @name for the setup @setup_id (NULL: any): its entry of
 * @setup when that is this setup's, else one made of GET /environments/{name}'s state and error.
 * Returns an exit code. */
static int wait_entry(const CtlOptions *o, json_object *setup, const char *name, const char *setup_id,
                      json_object **ret) {
        _cleanup_(json_object_putp) json_object *env = NULL, *e = NULL;
        _cleanup_free_ char *path = NULL;
        json_object *entry = env_setup_entry(setup, name);
        const char *id = json_string_field(entry, "setupId"), *state, *error;
        int r;

        if (entry && (!setup_id || !id || streq(id, setup_id))) {
                *ret = json_object_get(entry);
                return 0;
        }

        path = env_path(name, NULL);
        if (!path)
                return CTL_EXIT_FAILURE;
        r = request_get(o, path, &env);
        if (r != 0)
                return r;
        state = json_string_field(env, "state") ?: "pending";
        error = json_string_field(env, "error");
        e = json_object_new_object();
        if (!e || json_add_string(e, "name", name, strlen(name)) < 0 ||
            json_add_string(e, "phase", state, strlen(state)) < 0 ||
            (error && json_add_string(e, "error", error, strlen(error)) < 0))
                return log_oom();
        *ret = STEAL(e);
        return 0;
}

/* create/install --wait: follow environment @name's setup @setup_id until it is ready (0) or
 * failed (1). With --json the environment's final state is printed. */
static int wait_for(const CtlOptions *o, const char *name, const char *setup_id) {
        _cleanup_(progress_done) Progress p = {};
        _cleanup_(json_object_putp) json_object *entry = NULL;
        uint64_t deadline = poll_deadline(o);
        const char *phase;
        int r;

        progress_init(&p);
        for (;;) {
                _cleanup_(json_object_putp) json_object *setup = NULL;

                r = request_get(o, ENV_SETUP_PATH, &setup);
                if (r != 0)
                        return r;
                json_object_put(entry);
                entry = NULL;
                r = wait_entry(o, setup, name, setup_id, &entry);
                if (r != 0)
                        return r;
                if (!o->json) {
                        r = progress_show(&p, &entry, 1);
                        if (r < 0)
                                return progress_failed(r);
                }
                phase = json_string_field(entry, "phase");
                if (env_phase_final(phase))
                        break;
                r = poll_wait(deadline);
                if (r != 0)
                        return r;
        }

        if (o->json) {
                _cleanup_(json_object_putp) json_object *env = NULL;
                _cleanup_free_ char *path = env_path(name, NULL);

                if (!path)
                        return CTL_EXIT_FAILURE;
                r = request_get(o, path, &env);
                if (r != 0)
                        return r;
                r = show_answer(o, env, NULL);
                if (r != 0)
                        return r;
        }
        if (streq(phase, "failed")) {
                _cleanup_free_ char *ename = output_escaped(name),
                                    *eerr = output_escaped(json_string_field(entry, "error") ?: "no reason given");

                log_error("The setup of environment %s failed: %s", ename ?: "", eerr ?: "");
                return CTL_EXIT_FAILURE;
        }
        return 0;
}

/* ---- create, install, remove ------------------------------------------------------------------- */

/* PUT @body to environment @name, then show the answer or --wait for the setup. */
static int put_env(const CtlOptions *o, const char *name, json_object *body) {
        static const char *const first[] = { "name", "state", "setupId", NULL };
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *path = env_path(name, NULL);
        int r;

        if (!path)
                return CTL_EXIT_FAILURE;
        r = request_put(o, path, body, &answer);
        if (r != 0)
                return r;
        if (!o->wait)
                return show_answer(o, answer, first);
        return wait_for(o, name, json_string_field(answer, "setupId"));
}

/* A body the pure helpers refused or could not make. */
static int body_failed(int r) {
        if (r == -EINVAL) {
                log_error("--wheel expects WORKSPACE:PATH.");
                return CTL_EXIT_USAGE;
        }
        if (r == -EBADMSG) {
                log_error("The environment's answer has no 'kind'.");
                return CTL_EXIT_FAILURE;
        }
        return log_oom();
}

static int env_create(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *body = NULL;
        int r;

        if (!o->env_kind) {
                log_error("env create needs --kind python, r or conda.");
                return CTL_EXIT_USAGE;
        }
        r = env_create_body(&(const EnvCreateArgs) {
                                    .kind = o->env_kind,
                                    .index_url = o->env_index_url,
                                    .preset = o->env_preset,
                                    .offline = o->env_offline,
                                    .channels = o->env_channels,
                                    .n_channels = o->n_env_channels,
                                    .wheels = o->env_wheels,
                                    .n_wheels = o->n_env_wheels,
                                    .packages = (const char *const *) argv + 1,
                                    .n_packages = argc - 1,
                            },
                            &body);
        if (r < 0)
                return body_failed(r);
        return put_env(o, argv[0], body);
}

static int env_install(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *current = NULL, *body = NULL;
        _cleanup_free_ char *path = NULL;
        int r;

        if (argc < 2 && o->n_env_wheels == 0) {
                log_error("env install needs a package or --wheel WORKSPACE:PATH.");
                return CTL_EXIT_USAGE;
        }
        path = env_path(argv[0], NULL);
        if (!path)
                return CTL_EXIT_FAILURE;
        r = request_get(o, path, &current);
        if (r != 0)
                return r;
        r = env_install_body(current, (const char *const *) argv + 1, argc - 1, o->env_wheels, o->n_env_wheels,
                             &body);
        if (r < 0)
                return body_failed(r);
        return put_env(o, argv[0], body);
}

static int env_remove(const CtlOptions *o, int argc, char *argv[]) {
        static const char *const first[] = { "name", "state", NULL };
        _cleanup_free_ char *path = env_path(argv[0], NULL);

        if (!path)
                return CTL_EXIT_FAILURE;
        return request_and_show(o,
                                &(const Request) {
                                        .method = "DELETE",
                                        .path = path,
                                        .need_token = true,
                                        .timeout_usec = o->timeout_usec,
                                },
                                first);
}

/* ---- setup ------------------------------------------------------------------------------------- */

/* POST /environments/setup/retry [{"name"}]; shows the answer unless the setup is followed. */
static int setup_retry(const CtlOptions *o, const char *name) {
        _cleanup_(json_object_putp) json_object *body = NULL, *answer = NULL;
        int r;

        if (name) {
                body = json_object_new_object();
                if (!body || json_add_string(body, "name", name, strlen(name)) < 0)
                        return log_oom();
        }
        r = request(o,
                    &(const Request) {
                            .method = "POST",
                            .path = ENV_SETUP_PATH "/retry",
                            .need_token = true,
                            .json = body,
                            .timeout_usec = o->timeout_usec,
                    },
                    &answer);
        if (r != 0 || o->follow)
                return r;
        if (o->json)
                return show_answer(o, answer, NULL);
        printf("retried:   ");
        if (list_length(answer, "retried") == 0)
                printf("(none)\n");
        for (size_t i = 0; i < list_length(answer, "retried"); i++) {
                _cleanup_free_ char *e = output_escaped(
                        json_object_get_string(json_object_array_get_idx(json_array_field(answer, "retried"), i)));

                if (!e)
                        return log_oom();
                printf("%s%s", e, i + 1 < list_length(answer, "retried") ? ", " : "\n");
        }
        return flush_stdout();
}

/* env setup [--follow]: the progress of every environment's setup, once or until none is pending
 * or building (then 0 when all are ready, 1 when one failed). */
static int setup_show(const CtlOptions *o) {
        _cleanup_(progress_done) Progress p = {};
        _cleanup_(json_object_putp) json_object *answer = NULL;
        uint64_t deadline = poll_deadline(o);
        EnvOutcome outcome;
        int r;

        progress_init(&p);
        if (!o->follow)
                p.tty = false;          /* printed once, never redrawn */
        for (;;) {
                _cleanup_free_ json_object **entries = NULL;
                size_t n = 0;

                json_object_put(answer);
                answer = NULL;
                r = request_get(o, ENV_SETUP_PATH, &answer);
                if (r != 0)
                        return r;
                if (!json_array_field(answer, "setup")) {
                        log_error("The answer has no 'setup' list.");
                        return CTL_EXIT_FAILURE;
                }
                outcome = env_setup_outcome(answer);
                if (!o->json) {
                        entries = setup_entries(answer, &n);
                        if (!entries)
                                return log_oom();
                        r = progress_show(&p, entries, n);
                        if (r < 0)
                                return progress_failed(r);
                }
                if (!o->follow || outcome != ENV_OUTCOME_RUNNING)
                        break;
                r = poll_wait(deadline);
                if (r != 0)
                        return r;
        }

        if (o->json) {
                r = show_answer(o, answer, NULL);
                if (r != 0)
                        return r;
        }
        if (o->follow && outcome == ENV_OUTCOME_FAILED) {
                log_error("The setup of an environment failed (see 'env setup').");
                return CTL_EXIT_FAILURE;
        }
        return 0;
}

static int env_setup(const CtlOptions *o, int argc, char *argv[]) {
        int r;

        if (argc > 0 && !o->env_retry) {
                log_error("env setup takes a NAME only with --retry.");
                return CTL_EXIT_USAGE;
        }
        if (o->env_retry) {
                r = setup_retry(o, argc > 0 ? argv[0] : NULL);
                if (r != 0 || !o->follow)
                        return r;
        }
        return setup_show(o);
}

/* ---- dispatch ---------------------------------------------------------------------------------- */

static const struct {
        const char *name;
        int min_args;
        int max_args;
        EnvOptions options;
        int (*run)(const CtlOptions *o, int argc, char *argv[]);
} env_commands[] = {
        { "list",      0, 0,       0,                                         env_list      },
        { "show",      1, 1,       0,                                         env_show      },
        { "create",    1, INT_MAX, ENV_OPT_CREATE | ENV_OPT_WHEEL | ENV_OPT_WAIT, env_create },
        { "install",   1, INT_MAX, ENV_OPT_WHEEL | ENV_OPT_WAIT,              env_install   },
        { "remove",    1, 1,       0,                                         env_remove    },
        { "revisions", 1, 1,       0,                                         env_revisions },
        { "setup",     0, 1,       ENV_OPT_FOLLOW | ENV_OPT_RETRY,            env_setup     },
};

/* An option given to a subcommand that does not take it is a usage error. */
static int check_options(const CtlOptions *o, const char *sub, EnvOptions allowed) {
        const struct {
                EnvOptions flag;
                bool given;
                const char *name;
        } given[] = {
                { ENV_OPT_CREATE, o->env_kind,           "--kind"      },
                { ENV_OPT_CREATE, o->env_index_url,      "--index-url" },
                { ENV_OPT_CREATE, o->env_preset,         "--preset"    },
                { ENV_OPT_CREATE, o->env_offline,        "--offline"   },
                { ENV_OPT_CREATE, o->n_env_channels > 0, "--channel"   },
                { ENV_OPT_WHEEL,  o->n_env_wheels > 0,   "--wheel"     },
                { ENV_OPT_WAIT,   o->wait,           "--wait"      },
                { ENV_OPT_RETRY,  o->env_retry,          "--retry"     },
                { ENV_OPT_FOLLOW, o->follow,             "--follow"    },
        };

        for (size_t i = 0; i < ELEMENTSOF(given); i++)
                if (given[i].given && !(allowed & given[i].flag)) {
                        log_error("%s is not an option of 'env %s'.", given[i].name, sub);
                        return CTL_EXIT_USAGE;
                }
        return 0;
}

int verb_env(const CtlOptions *o, int argc, char *argv[]) {
        const char *sub = argv[0];
        int r;

        for (size_t i = 0; i < ELEMENTSOF(env_commands); i++) {
                if (!streq(env_commands[i].name, sub))
                        continue;
                r = check_options(o, sub, env_commands[i].options);
                if (r != 0)
                        return r;
                if (argc - 1 < env_commands[i].min_args) {
                        log_error("Missing argument for 'env %s'.", sub);
                        return CTL_EXIT_USAGE;
                }
                if (argc - 1 > env_commands[i].max_args) {
                        log_error("Too many arguments for 'env %s'.", sub);
                        return CTL_EXIT_USAGE;
                }
                return env_commands[i].run(o, argc - 1, argv + 1);
        }

        _cleanup_free_ char *e = output_escaped(sub);
        log_error("Unknown env command '%s': expected list, show, create, install, remove, revisions or setup.",
                  e ?: "");
        return CTL_EXIT_USAGE;
}
