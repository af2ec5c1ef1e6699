/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's settings: quota (GET/PUT /api/quota-settings) and the sandboxes' network policy
 * (GET/PUT /api/network-policy). */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "exec-util.h"
#include "output.h"

static json_object *unref(json_object *o) {
        json_object_put(o);
        return NULL;
}

/* ---- quota ------------------------------------------------------------------------------------- */

static const struct {
        const char *key;
        const char *field;
} quota_keys[] = {
        { "workspace",      "maxWorkspaceBytes"     },
        { "output",         "maxOutputBytes"        },
        { "upload-file",    "maxUploadFileBytes"    },
        { "upload-request", "maxUploadRequestBytes" },
};

static const char *const quota_first[] = {
        "maxWorkspaceBytes", "maxOutputBytes", "maxUploadFileBytes", "maxUploadRequestBytes", NULL,
};

static int quota_set(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *body = json_object_new_object();
        int r;

        if (!body)
                return log_oom();
        if (argc == 0) {
                log_error("quota set needs KEY=SIZE (keys: workspace, output, upload-file, upload-request).");
                return CTL_EXIT_USAGE;
        }
        for (int i = 0; i < argc; i++) {
                _cleanup_free_ char *e = output_escaped(argv[i]);
                const char *eq = strchr(argv[i], '='), *field = NULL;
                uint64_t v;

                for (size_t k = 0; eq && k < ELEMENTSOF(quota_keys); k++)
                        if (strlen(quota_keys[k].key) == (size_t) (eq - argv[i]) &&
                            strneq(argv[i], quota_keys[k].key, eq - argv[i]))
                                field = quota_keys[k].field;
                if (!field) {
                        log_error("Invalid quota setting '%s': expected KEY=SIZE with KEY one of workspace, output, "
                                  "upload-file, upload-request.", e ?: "");
                        return CTL_EXIT_USAGE;
                }
                r = exec_parse_size(eq + 1, &v);
                if (r < 0 || v > INT64_MAX) {
                        log_error("Invalid size in '%s': expected bytes with an optional K, M, G or T suffix "
                                  "(1024-based), or 0 for unlimited.", e ?: "");
                        return CTL_EXIT_USAGE;
                }
                /* A key given twice: the last one wins. */
                if (json_add_u64(body, field, v) < 0)
                        return log_oom();
        }

        return request_and_show(o,
                                &(const Request) {
                                        .method = "PUT",
                                        .path = "/api/quota-settings",
                                        .need_token = true,
                                        .json = body,
                                        .timeout_usec = o->timeout_usec,
                                },
                                quota_first);
}

int verb_quota(const CtlOptions *o, int argc, char *argv[]) {
        if (argc > 0 && streq(argv[0], "set"))
                return quota_set(o, argc - 1, argv + 1);
        if (argc > 1 || (argc == 1 && !streq(argv[0], "show"))) {
                log_error("Usage: quota [show] | quota set KEY=SIZE...");
                return CTL_EXIT_USAGE;
        }
        return request_and_show(o,
                                &(const Request) {
                                        .method = "GET",
                                        .path = "/api/quota-settings",
                                        .need_token = true,
                                        .timeout_usec = o->timeout_usec,
                                },
                                quota_first);
}

/* ---- network policy ---------------------------------------------------------------------------- */

#define POLICY_PATH "/api/network-policy"

/* An allowlist entry as the daemon shows it: lower case, no trailing dot on the host. Only ASCII
 * is folded; IDNs are compared in the A-label form "policy show" prints. NULL on OOM. */
static char *entry_canonical(const char *s) {
        char *c = strdup(s), *colon;
        size_t hl;

        if (!c)
                return NULL;
        for (char *p = c; *p; p++)
                if (*p >= 'A' && *p <= 'Z')
                        *p += 'a' - 'A';
        colon = strrchr(c, ':');
        hl = colon ? (size_t) (colon - c) : strlen(c);
        if (hl > 0 && c[hl - 1] == '.')
                memmove(c + hl - 1, c + hl, strlen(c + hl) + 1);
        return c;
}

static bool entries_equal(const char *a, const char *b) {
        _cleanup_free_ char *ca = entry_canonical(a), *cb = entry_canonical(b);

        return ca && cb && streq(ca, cb);
}

/* A new array of the strings of @o's @key (missing: empty). NULL on OOM. */
static json_object *string_list(json_object *o, const char *key) {
        json_object *l = json_object_new_array(), *v;

        if (!l)
                return NULL;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_array))
                return l;
        for (size_t i = 0; i < json_object_array_length(v); i++) {
                json_object *s = json_object_array_get_idx(v, i);

                if (!json_object_is_type(s, json_type_string))
                        continue;
                if (json_object_array_add(l, json_object_get(s)) < 0) {
                        json_object_put(s);
                        json_object_put(l);
                        return NULL;
                }
        }
        return l;
}

static int list_add_args(json_object *l, int argc, char *argv[]) {
        for (int i = 0; i < argc; i++) {
                json_object *s = json_object_new_string(argv[i]);

                if (!s || json_object_array_add(l, s) < 0) {
                        json_object_put(s);
                        return -ENOMEM;
                }
        }
        return 0;
}

static int print_list(const char *label, json_object *o, const char *key) {
        printf("%-10s", label);
        return print_string_list(json_array_field(o, key));
}

/* The policy in @answer; @before: the revision before a change (NULL for "show"). */
static int print_policy(const CtlOptions *o, json_object *answer, const char *before) {
        _cleanup_free_ char *mode = output_escaped(json_string_field(answer, "mode") ?: "?"),
                            *rev = output_escaped(json_string_field(answer, "revision") ?: "-"),
                            *old = before ? output_escaped(before) : NULL;

        if (o->json)
                return show_answer(o, answer, NULL);
        if (!mode || !rev || (before && !old))
                return log_oom();
        printf("%-10s%s\n", "mode:", mode);
        if (!before)
                printf("%-10s%s\n", "revision:", rev);
        else if (streq(before, json_string_field(answer, "revision") ?: "-"))
                printf("%-10s%s (unchanged)\n", "revision:", rev);
        else
                printf("%-10s%s (was %s)\n", "revision:", rev, old);
        if (print_list("allow:", answer, "allow") < 0 || print_list("mirrors:", answer, "mirrors") < 0)
                return log_oom();
        return flush_stdout();
}

static void note_empty_allowlist(void) {
        log_error("Note: the allow list is empty. The mode stays 'allowlist', so runs can reach no host "
                  "(use 'policy set none' to turn the sandboxes' network off altogether).");
}

static int policy_usage(void) {
        log_error("Usage: policy [show] | policy set none | policy set allowlist ENTRY... | "
                  "policy allow ENTRY... | policy deny ENTRY... | policy mirrors (CIDR... | none)");
        return CTL_EXIT_USAGE;
}

/* Whether the arguments of "policy @verb" are complete and make sense. */
static bool policy_args_valid(const char *verb, int argc, char *argv[]) {
        if (streq(verb, "show"))
                return argc <= 1;
        if (streq(verb, "set"))
                return !(argc < 2 || (!streq(argv[1], "none") && !streq(argv[1], "allowlist")) ||
                         (streq(argv[1], "none") && argc > 2));
        if (streq(verb, "allow") || streq(verb, "deny") || streq(verb, "mirrors"))
                return !(argc < 2 || (streq(verb, "mirrors") && streq(argv[1], "none") && argc > 2));
        return false;
}

/* policy deny ENTRY...: the allow list of @current without argv[1..]; an entry that is not in it
 * is reported. @ret_removed: how many were dropped. NULL on OOM. */
static json_object *allow_without(json_object *current, int argc, char *argv[], size_t *ret_removed) {
        json_object *old = string_list(current, "allow"), *allow = json_object_new_array();
        size_t removed = 0;

        for (size_t i = 0; old && allow && i < json_object_array_length(old); i++) {
                json_object *e = json_object_array_get_idx(old, i);
                bool drop = false;

                for (int k = 1; k < argc && !drop; k++)
                        drop = entries_equal(json_object_get_string(e), argv[k]);
                if (drop)
                        removed++;
                else if (json_object_array_add(allow, json_object_get(e)) < 0) {
                        json_object_put(e);
                        allow = unref(allow);
                }
        }
        for (int k = 1; old && k < argc; k++) {
                bool found = false;

                for (size_t i = 0; i < json_object_array_length(old) && !found; i++)
                        found = entries_equal(json_object_get_string(json_object_array_get_idx(old, i)), argv[k]);
                if (!found) {
                        _cleanup_free_ char *e = output_escaped(argv[k]);
                        log_error("'%s' is not in the allow list (see 'policy show').", e ?: "");
                }
        }
        if (!old) {
                json_object_put(allow);
                allow = NULL;
        } else
                json_object_put(old);
        *ret_removed = removed;
        return allow;
}

int verb_policy(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *current = NULL, *body = NULL, *answer = NULL;
        _cleanup_free_ char *before = NULL;
        json_object *allow = NULL, *mirrors = NULL;
        const char *verb = argc > 0 ? argv[0] : "show", *mode;
        bool changed = true, empty_note = false;
        int r;

        if (!policy_args_valid(verb, argc, argv))
                return policy_usage();

        r = request_get(o, POLICY_PATH, &current);
        if (r != 0)
                return r;
        if (streq(verb, "show"))
                return print_policy(o, current, NULL);

        before = strdup(json_string_field(current, "revision") ?: "-");
        mode = json_string_field(current, "mode") ?: "none";
        body = json_object_new_object();
        if (!before || !body)
                return log_oom();

        /* The whole policy goes back: the lists not being changed are kept as they are. */
        if (streq(verb, "set")) {
                mode = argv[1];
                allow = json_object_new_array();
                mirrors = string_list(current, "mirrors");
                if (allow && list_add_args(allow, argc - 2, argv + 2) < 0)
                        allow = unref(allow);
                empty_note = streq(mode, "allowlist") && argc == 2;
        } else if (streq(verb, "allow")) {
                if (!streq(mode, "allowlist"))
                        log_error("Note: the mode changes from '%s' to 'allowlist'.", mode);
                mode = "allowlist";
                allow = string_list(current, "allow");
                mirrors = string_list(current, "mirrors");
                if (allow && list_add_args(allow, argc - 1, argv + 1) < 0)
                        allow = unref(allow);
        } else if (streq(verb, "deny")) {
                size_t removed = 0;

                allow = allow_without(current, argc, argv, &removed);
                mirrors = string_list(current, "mirrors");
                changed = removed > 0;
                empty_note = allow && streq(mode, "allowlist") && json_object_array_length(allow) == 0;
        } else { /* mirrors */
                allow = string_list(current, "allow");
                mirrors = json_object_new_array();
                if (mirrors && !streq(argv[1], "none") && list_add_args(mirrors, argc - 1, argv + 1) < 0)
                        mirrors = unref(mirrors);
        }

        if (!allow || !mirrors || json_add_string(body, "mode", mode, strlen(mode)) < 0) {
                json_object_put(allow);
                json_object_put(mirrors);
                return log_oom();
        }
        if (json_add(body, "allow", allow) < 0) {
                json_object_put(mirrors);
                return log_oom();
        }
        if (json_add(body, "mirrors", mirrors) < 0)
                return log_oom();

        if (!changed)
                /* Nothing to remove: the policy stays as it is. */
                return print_policy(o, current, before);

        r = request_put(o, POLICY_PATH, body, &answer);
        if (r != 0)
                return r;
        if (empty_note)
                note_empty_allowlist();
        return print_policy(o, answer, before);
}
