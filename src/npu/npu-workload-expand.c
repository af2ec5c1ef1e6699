/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One workload expanded for one request: the job's argv with its repository paths and its config
 * file checked after realpath(), the config's declared path fields checked and rewritten to the
 * paths they resolve to, the copy of the config the job is handed.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "npu/npu-workload-internal.h"
#include "npu/npu-workload.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/strv.h"

/* A job's config: the document itself may nest; this bounds json-c's recursion. */
#define NPU_CONFIG_MAX_DEPTH 64

/* @path is @root or below it; both are realpath()s, @root is not "/". */
static bool path_under(const char *path, const char *root) {
        size_t n = strlen(root);

        return strneq(path, root, n) && (path[n] == '\0' || path[n] == '/');
}

static char *path_join(const char *a, const char *b) {
        char *p;

        if (asprintf(&p, "%s%s%s", a, streq(a, "/") ? "" : "/", b) < 0)
                return NULL;
        return p;
}

/* @parent[@key] = a new string @s. Return: 0 or -ENOMEM. */
static int add_field_string(json_object *parent, const char *key, const char *s) {
        json_object *v = json_object_new_string(s);

        if (!v)
                return -ENOMEM;
        if (json_object_object_add(parent, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

/* ---- inputs and the config file ------------------------------------------------------------------ */

/* The request's inputs: *ret_config_path is the client's configPath, or NULL. */
static int parse_inputs(const NpuWorkload *w, json_object *inputs, const char **ret_config_path, char **ret_why) {
        json_object *v = NULL;
        const char *s;

        if (inputs && !json_object_is_type(inputs, json_type_object))
                return npu_refuse(ret_why, -EBADMSG, "inputs: must be an object");
        if (inputs) {
                json_object_object_foreach(inputs, key, val) {
                        (void) val;
                        if (!streq(key, "configPath"))
                                return npu_refuse(ret_why, -EBADMSG, "inputs: unknown input (only configPath)");
                }
        }
        if (!inputs || !json_object_object_get_ex(inputs, "configPath", &v)) {
                if (w->takes_config)
                        return npu_refuse(ret_why, -EBADMSG, "inputs.configPath is required by workload '%s'", w->id);
                *ret_config_path = NULL;
                return 0;
        }
        if (!w->takes_config)
                return npu_refuse(ret_why, -EBADMSG, "configPath: workload '%s' takes no config", w->id);
        if (!json_object_is_type(v, json_type_string))
                return npu_refuse(ret_why, -EBADMSG, "configPath: must be a string");
        s = json_object_get_string(v);
        if (!*s || strlen(s) != (size_t) json_object_get_string_len(v) || strlen(s) > NPU_PATH_MAX ||
            !npu_string_clean(s))
                return npu_refuse(ret_why, -EBADMSG,
                                  "configPath: must be 1 to 4096 bytes without control characters");
        if (s[0] == '/')
                return npu_refuse(ret_why, -EPERM, "configPath: must be relative to the session's workspace");
        /* ".." is refused as written, before anything is resolved: a client has no reason for it */
        for (const char *c = s;;) {
                size_t n = strcspn(c, "/");

                if (n == 2 && strneq(c, "..", 2))
                        return npu_refuse(ret_why, -EPERM, "configPath: may not hold a \"..\" component");
                if (c[n] == '\0')
                        break;
                c += n + 1;
        }
        *ret_config_path = s;
        return 0;
}

/*
 * Open the resolved config file @resolved below @ws. openat2() refuses any symlink on the way, so a
 * component swapped for one since realpath() cannot take the open outside the workspace; where
 * openat2() is missing (ENOSYS) or filtered (EPERM), O_NOFOLLOW on the resolved path covers the
 * last component only.
 */
static int open_config(const char *ws, const char *resolved, char **ret_why) {
        _cleanup_close_ int dfd = -EBADF;
        struct open_how how = {
                .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd;

        dfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return npu_refuse(ret_why, errno == ENOENT ? -ENOENT : -EPERM,
                                  "the session's workspace cannot be opened: %m");
        fd = (int) syscall(SYS_openat2, dfd, resolved + strlen(ws) + 1, &how, sizeof(how));
        if (fd < 0 && (errno == ENOSYS || errno == EPERM))
                fd = open(resolved, (int) how.flags);
        if (fd < 0 && errno == ENOENT)
                return npu_refuse(ret_why, -ENOENT, "configPath: no such file");
        if (fd < 0 && (errno == ELOOP || errno == EXDEV))
                return npu_refuse(ret_why, -EPERM, "configPath: changed while it was being checked");
        if (fd < 0)
                return npu_refuse(ret_why, -EPERM, "configPath: '%s' cannot be opened: %m", resolved + strlen(ws) + 1);
        return fd;
}

/* Resolve, open and read the config file once. */
static int read_config(const char *ws, const char *rel, char **ret_path, char **ret_text, size_t *ret_size,
                       char **ret_why) {
        _cleanup_free_ char *joined = NULL, *resolved = NULL, *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        size_t want;
        ssize_t n;

        joined = path_join(ws, rel);
        if (!joined)
                return -ENOMEM;
        resolved = realpath(joined, NULL);
        if (!resolved && errno == ENOMEM)
                return -ENOMEM;
        if (!resolved && (errno == ENOENT || errno == ENOTDIR))
                return npu_refuse(ret_why, -ENOENT, "configPath: no such file");
        if (!resolved)
                return npu_refuse(ret_why, -EPERM, "configPath: '%s' cannot be resolved: %m", rel);
        if (!path_under(resolved, ws))
                return npu_refuse(ret_why, -EPERM, "configPath: resolves outside the session's workspace");
        if (streq(resolved, ws))
                return npu_refuse(ret_why, -EPERM, "configPath: not a regular file");

        fd = open_config(ws, resolved, ret_why);
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return npu_refuse(ret_why, -EPERM, "configPath: '%s' cannot be examined: %m", rel);
        if (!S_ISREG(st.st_mode))
                return npu_refuse(ret_why, -EPERM, "configPath: not a regular file");
        /* A hard link may name a file the session could never reach by a path (SECURITY.md §5). */
        if (st.st_nlink > 1)
                return npu_refuse(ret_why, -EPERM, "configPath: has more than one hard link");
        if ((uint64_t) st.st_size > NPU_CONFIG_MAX_BYTES)
                return npu_refuse(ret_why, -EBADMSG, "configPath: larger than 1 MiB");
        /* one byte more than fstat() said: a file that grew since is seen as too large or cut */
        want = (size_t) st.st_size + 1;
        text = malloc(want + 1);
        if (!text)
                return -ENOMEM;
        n = loop_read(fd, text, want);
        if (n < 0)
                return npu_refuse(ret_why, -EPERM, "configPath: '%s' cannot be read: %s", rel,
                                  strerror(-errno_from_ssize(n)));
        if ((size_t) n > NPU_CONFIG_MAX_BYTES)
                return npu_refuse(ret_why, -EBADMSG, "configPath: larger than 1 MiB");
        text[n] = '\0';
        *ret_path = STEAL(resolved);
        *ret_text = STEAL(text);
        *ret_size = (size_t) n;
        return 0;
}

/* ---- config path fields ------------------------------------------------------------------------ */

/*
 * realpath() of @path, or, while it does not exist, of its nearest existing parent with the
 * missing components appended (plain names only). A dangling symlink is refused: the job would
 * create its target. Return: 0, -EPERM/-ENOENT with a static reason, -ENOMEM.
 */
static int resolve_maybe_missing(const char *path, char **ret, const char **ret_reason) {
        _cleanup_strv_free_ char **comps = NULL;
        size_t n;
        int r;

        for (const char *c = path;;) {
                size_t l = strcspn(c, "/");

                if (l > 0) {
                        r = strv_consume(&comps, strndup(c, l));
                        if (r < 0)
                                return r;
                }
                if (c[l] == '\0')
                        break;
                c += l + 1;
        }
        n = strv_length(comps);
        for (size_t k = n;; k--) {
                _cleanup_free_ char *prefix = NULL, *real = NULL;
                struct stat st;
                size_t len = 1;
                char *p;

                for (size_t i = 0; i < k; i++)
                        len += strlen(comps[i]) + 1;
                prefix = p = malloc(len + 1);
                if (!prefix)
                        return -ENOMEM;
                *p = '\0';
                for (size_t i = 0; i < k; i++)
                        p = stpcpy(stpcpy(p, "/"), comps[i]);
                if (k == 0)
                        strcpy(prefix, "/");

                real = realpath(prefix, NULL);
                if (real) {
                        for (size_t i = k; i < n; i++) {
                                char *j;

                                if (streq(comps[i], ".") || streq(comps[i], "..")) {
                                        *ret_reason = "\".\" or \"..\" after a directory that does not exist";
                                        return -EPERM;
                                }
                                j = path_join(real, comps[i]);
                                if (!j)
                                        return -ENOMEM;
                                free(real);
                                real = j;
                        }
                        *ret = STEAL(real);
                        return 0;
                }
                if (errno == ENOMEM)
                        return -ENOMEM;
                if (errno != ENOENT) {
                        *ret_reason = errno == ENOTDIR ? "a component on the way is not a directory" :
                                      errno == ELOOP ? "too many levels of symbolic links" : "cannot be resolved";
                        return -EPERM;
                }
                if (lstat(prefix, &st) >= 0) {
                        *ret_reason = "a symbolic link that leads nowhere (its target would be created)";
                        return -EPERM;
                }
                if (k == 0)
                        break;
        }
        *ret_reason = "cannot be resolved";
        return -ENOENT;
}

/* One value of a path field: check it against @roots and put the resolved path in its place. */
static int check_field_value(json_object *parent, const char *key, json_object *v, const char *field,
                             char *const *roots, char **ret_why) {
        _cleanup_free_ char *candidate = NULL, *resolved = NULL;
        const char *s, *reason = NULL;
        struct stat st;
        int r;

        if (!json_object_is_type(v, json_type_string))
                return npu_refuse(ret_why, -EPERM, "%s: must be a string", field);
        s = json_object_get_string(v);
        if (!*s || strlen(s) != (size_t) json_object_get_string_len(v) || strlen(s) > NPU_PATH_MAX)
                return npu_refuse(ret_why, -EPERM, "%s: must be a path of 1 to 4096 bytes", field);
        candidate = s[0] == '/' ? strdup(s) : path_join(roots[0], s);
        if (!candidate)
                return -ENOMEM;
        r = resolve_maybe_missing(candidate, &resolved, &reason);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return npu_refuse(ret_why, r, "%s: %s", field, reason);

        for (size_t i = 0; roots[i]; i++)
                if (path_under(resolved, roots[i])) {
                        /* a file of the workspace with another name elsewhere: see read_config() */
                        if (i == 0 && lstat(resolved, &st) >= 0 && S_ISREG(st.st_mode) && st.st_nlink > 1)
                                return npu_refuse(ret_why, -EPERM, "%s: has more than one hard link", field);
                        return add_field_string(parent, key, resolved);
                }
        return npu_refuse(ret_why, -EPERM,
                          "%s: resolves outside the session's workspace and the workload's resource roots", field);
}

/*
 * The values the field @segs[@i..] names below @o, under every reading of dotted keys: "a.b.c" is
 * o["a"]["b"]["c"], o["a.b"]["c"], o["a"]["b.c"] and o["a.b.c"]. A job whose config library
 * flattens or splits keys differently from us still meets only checked values.
 */
static int walk_field(json_object *o, char **segs, size_t i, const char *field, char *const *roots,
                      char **ret_why) {
        _cleanup_free_ char *key = NULL;
        size_t n = strv_length(segs);
        int r;

        for (size_t j = i; j < n; j++) {
                json_object *v;
                char *k;

                if (asprintf(&k, "%s%s%s", key ?: "", key ? "." : "", segs[j]) < 0)
                        return -ENOMEM;
                free(key);
                key = k;
                if (!json_object_object_get_ex(o, key, &v))
                        continue;
                if (j + 1 == n)
                        return check_field_value(o, key, v, field, roots, ret_why);
                if (!json_object_is_type(v, json_type_object))
                        return npu_refuse(ret_why, -EPERM, "%s: '%s' on the way is not an object", field, key);
                r = walk_field(v, segs, j + 1, field, roots, ret_why);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int check_config_fields(const NpuWorkload *w, json_object *config, char *const *roots, char **ret_why) {
        int r;

        STRV_FOREACH(f, w->config_fields) {
                _cleanup_strv_free_ char **segs = NULL;

                for (const char *c = *f;;) {
                        size_t l = strcspn(c, ".");

                        r = strv_consume(&segs, strndup(c, l));
                        if (r < 0)
                                return r;
                        if (c[l] == '\0')
                                break;
                        c += l + 1;
                }
                r = walk_field(config, segs, 0, *f, roots, ret_why);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The workspace, then each resource root that exists (a missing one matches nothing, nor does "/"). */
static int roots_make(const NpuWorkload *w, const char *ws, char ***ret) {
        _cleanup_strv_free_ char **v = NULL;
        int r;

        r = strv_extend(&v, ws);
        if (r < 0)
                return r;
        STRV_FOREACH(root, w->resource_roots) {
                char *real = realpath(*root, NULL);

                if (!real && errno == ENOMEM)
                        return -ENOMEM;
                if (!real)
                        continue;
                if (streq(real, "/")) {
                        free(real);
                        continue;
                }
                r = strv_consume(&v, real);
                if (r < 0)
                        return r;
        }
        *ret = STEAL(v);
        return 0;
}

/* The config checked, its path fields rewritten, re-serialised: what the job will read. */
static int config_prepare(const NpuWorkload *w, const char *ws, const char *rel, NpuJobPlan *plan,
                          char **ret_why) {
        _cleanup_(json_object_putp) json_object *config = NULL;
        _cleanup_strv_free_ char **roots = NULL;
        _cleanup_free_ char *text = NULL;
        const char *out;
        size_t size = 0, out_len;
        int r;

        r = read_config(ws, rel, &plan->config_path, &text, &size, ret_why);
        if (r < 0)
                return r;
        r = npu_json_parse(text, size, NPU_CONFIG_MAX_DEPTH, "configPath", &config, ret_why);
        if (r < 0)
                return r;
        r = roots_make(w, ws, &roots);
        if (r < 0)
                return r;
        r = check_config_fields(w, config, roots, ret_why);
        if (r < 0)
                return r;
        out = json_object_to_json_string_length(config, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
                                                &out_len);
        if (!out)
                return -ENOMEM;
        plan->config_json = strndup(out, out_len);
        if (!plan->config_json)
                return -ENOMEM;
        plan->config_json_size = out_len;
        return 0;
}

/* ---- argv ------------------------------------------------------------------------------------ */

static int repo_path(const char *repo, const char *rel, size_t idx, char **ret, char **ret_why) {
        _cleanup_free_ char *joined = NULL, *real = NULL;

        joined = path_join(repo, rel);
        if (!joined)
                return -ENOMEM;
        real = realpath(joined, NULL);
        if (!real && errno == ENOMEM)
                return -ENOMEM;
        if (!real && (errno == ENOENT || errno == ENOTDIR))
                return npu_refuse(ret_why, -ENOENT, "argv[%zu]: ${repo:%s} does not exist", idx, rel);
        if (!real)
                return npu_refuse(ret_why, -EPERM, "argv[%zu]: ${repo:%s} cannot be resolved: %m", idx, rel);
        if (!path_under(real, repo))
                return npu_refuse(ret_why, -EPERM, "argv[%zu]: ${repo:%s} resolves outside the repository", idx, rel);
        *ret = STEAL(real);
        return 0;
}

static int build_argv(const NpuWorkload *w, const char *repo_root, NpuJobPlan *plan, char **ret_why) {
        _cleanup_free_ char *repo = NULL;
        int r;

        plan->config_args = calloc(w->n_argv, sizeof(size_t));
        if (!plan->config_args)
                return -ENOMEM;
        for (size_t i = 0; i < w->n_argv; i++) {
                const NpuArg *a = &w->argv[i];
                _cleanup_free_ char *path = NULL;
                char *word;

                switch (a->kind) {
                case NPU_ARG_REPO:
                        if (!repo) {
                                repo = realpath(repo_root, NULL);
                                if (!repo)
                                        return errno == ENOMEM ? -ENOMEM :
                                               npu_refuse(ret_why, -ENOENT, "the repository cannot be resolved: %m");
                                if (streq(repo, "/"))
                                        return npu_refuse(ret_why, -EPERM, "the repository resolves to \"/\"");
                        }
                        r = repo_path(repo, a->rel, i, &path, ret_why);
                        if (r < 0)
                                return r;
                        break;
                case NPU_ARG_CONFIG_PATH:
                        plan->config_args[plan->n_config_args++] = i;
                        break;
                case NPU_ARG_LITERAL:
                case _NPU_ARG_KIND_MAX:
                case _NPU_ARG_KIND_INVALID:
                        break;
                }
                if (asprintf(&word, "%s%s", a->text,
                             a->kind == NPU_ARG_REPO ? path :
                             a->kind == NPU_ARG_CONFIG_PATH ? plan->config_path : "") < 0)
                        return -ENOMEM;
                r = strv_consume(&plan->argv, word);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- the plan ---------------------------------------------------------------------------------- */

int npu_workload_expand(const NpuWorkload *w, const char *repo_root, const char *workspace_root,
                        json_object *inputs, NpuJobPlan *ret, char **ret_why) {
        _cleanup_(npu_job_plan_done) NpuJobPlan plan = {};
        const char *config_rel = NULL;
        int r;

        assert(w);
        r = parse_inputs(w, inputs, &config_rel, ret_why);
        if (r < 0)
                return r;
        plan.cwd = realpath(workspace_root, NULL);
        if (!plan.cwd)
                return errno == ENOMEM ? -ENOMEM :
                       npu_refuse(ret_why, -ENOENT, "the session's workspace cannot be resolved: %m");
        if (streq(plan.cwd, "/"))
                return npu_refuse(ret_why, -EPERM, "the session's workspace resolves to \"/\"");
        if (config_rel) {
                r = config_prepare(w, plan.cwd, config_rel, &plan, ret_why);
                if (r < 0)
                        return r;
        }
        r = build_argv(w, repo_root, &plan, ret_why);
        if (r < 0)
                return r;
        STRV_FOREACH(e, w->env) {
                r = strv_extend(&plan.env, *e);
                if (r < 0)
                        return r;
        }
        plan.chips = w->chips;
        plan.timeout_usec = w->timeout_usec;
        *ret = plan;
        plan = (NpuJobPlan) {};
        return 0;
}

int npu_job_plan_use_config_copy(NpuJobPlan *p, const char *copy_path) {
        _cleanup_strv_free_ char **words = NULL;
        size_t old;

        if (!copy_path || copy_path[0] != '/' || !p->config_path)
                return -EINVAL;
        old = strlen(p->config_path);
        /* all new words first, so that a failure leaves @p as it was */
        for (size_t i = 0; i < p->n_config_args; i++) {
                const char *w = p->argv[p->config_args[i]];
                char *n;

                if (asprintf(&n, "%.*s%s", (int) (strlen(w) - old), w, copy_path) < 0)
                        return -ENOMEM;
                if (strv_consume(&words, n) < 0)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < p->n_config_args; i++) {
                free(p->argv[p->config_args[i]]);
                p->argv[p->config_args[i]] = STEAL(words[i]);
        }
        return 0;
}

void npu_job_plan_done(NpuJobPlan *p) {
        strv_free(p->argv);
        strv_free(p->env);
        free(p->cwd);
        free(p->config_path);
        free(p->config_json);
        free(p->config_args);
        *p = (NpuJobPlan) {};
}
