/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * CDI "containerEdits": the strict decoding of one edit set and the checks of what a sandbox can
 * honour (cdi.h says which), with the first reason it cannot.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/cdi-internal.h"
#include "sandbox/sandbox-argv.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/strv.h"

/* ---- paths -------------------------------------------------------------------------------------- */

/* Absolute and normalised: no empty, "." or ".." component, no trailing '/', no control bytes. */
static bool path_normalised(const char *p) {
        if (p[0] != '/')
                return false;
        if (p[1] == '\0')
                return true;
        for (const char *c = p + 1;;) {
                size_t l = strcspn(c, "/");

                if (l == 0 || l > 255 || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                for (size_t i = 0; i < l; i++)
                        if ((unsigned char) c[i] < 0x20 || c[i] == 0x7f)
                                return false;
                c += l;
                if (*c == '\0')
                        return true;
                c++;
        }
}

static bool path_at_or_under(const char *path, const char *top) {
        size_t l = strlen(top);

        return strneq(path, top, l) && (path[l] == '\0' || path[l] == '/');
}

static bool path_device(const char *p) {
        return path_normalised(p) && strneq(p, "/dev/", 5) && p[5] != '\0';
}

/* What every sandbox shows read-only from the host at the same path (DESIGN.md §4: /usr, and the
 * system directories that are links into it or read-only binds of the host's). */
static bool path_visible(const char *p) {
        static const char *const tops[] = { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };

        for (size_t i = 0; i < ELEMENTSOF(tops); i++)
                if (path_at_or_under(p, tops[i]))
                        return true;
        return false;
}

/* ---- edit sets ---------------------------------------------------------------------------------- */

void cdi_node_done(CdiNode *n) {
        n->host_path = mfree(n->host_path);
        n->path = mfree(n->path);
}

void cdi_mount_done(CdiMount *m) {
        m->host_path = mfree(m->host_path);
        m->container_path = mfree(m->container_path);
}

void cdi_edit_lists_free(CdiNode *nodes, size_t n_nodes, CdiMount *mounts, size_t n_mounts, char **env,
                         char **visible) {
        for (size_t i = 0; i < n_nodes; i++)
                cdi_node_done(&nodes[i]);
        free(nodes);
        for (size_t i = 0; i < n_mounts; i++)
                cdi_mount_done(&mounts[i]);
        free(mounts);
        strv_free(env);
        strv_free(visible);
}

void cdi_edit_set_done(CdiEditSet *e) {
        cdi_edit_lists_free(e->nodes, e->n_nodes, e->mounts, e->n_mounts, e->env, e->visible);
        free(e->refusal);
        *e = (CdiEditSet) {};
}

/* The first reason an edit set cannot be honoured (later ones are not kept); what it held goes:
 * a refused set is never applied. Return: 0 or -ENOMEM. */
_printf_(2, 3)
static int refuse(CdiEditSet *e, const char *fmt, ...) {
        char *why = NULL;
        va_list ap;
        int r;

        if (e->refusal)
                return 0;
        va_start(ap, fmt);
        r = set_messagev(&why, 0, fmt, ap);
        va_end(ap);
        if (r < 0)
                return r;
        cdi_edit_set_done(e);
        e->refusal = why;
        return 0;
}

/* refuse() with the offending @value (from the spec: escaped) after "@path.@field: ". */
static int refuse_value(CdiEditSet *e, const char *path, const char *field, const char *value, const char *what) {
        _cleanup_free_ char *v = NULL;

        if (e->refusal)
                return 0;
        v = str_escape_log(value, 256);
        if (!v)
                return -ENOMEM;
        return refuse(e, "%s%s: '%s' %s", path, field, v, what);
}

/* ---- containerEdits ----------------------------------------------------------------------------- */

static int parse_env(CdiEditSet *e, json_object *a, const char *path, char **why) {
        size_t n;
        int r;

        r = cdi_check_array(a, path, CDI_EDITS_MAX, &n, why);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *p = cdi_path_index(path, i), *name = NULL, *shown_name = NULL;
                const char *s, *eq;

                if (!p)
                        return -ENOMEM;
                r = cdi_check_string(json_object_array_get_idx(a, i), p, &s, why);
                if (r < 0)
                        return r;
                eq = strchr(s, '=');
                if (!eq) {
                        r = refuse(e, "%s: not NAME=VALUE", p);
                        continue;
                }
                name = strndup(s, (size_t) (eq - s));
                if (!name)
                        return -ENOMEM;
                if (!sandbox_env_name_valid(name)) {
                        shown_name = str_escape_log(name, 64);
                        if (!shown_name)
                                return -ENOMEM;
                        r = refuse(e, "%s: the variable '%s' may not be set in a sandbox (reserved, LD_*, or not "
                                   "[A-Za-z_][A-Za-z0-9_]*)", p, shown_name);
                        continue;
                }
                if (!e->refusal)
                        r = strv_extend(&e->env, s);
        }
        return r;
}

static int check_node_fields(json_object *o, const char *path, char **why) {
        static const char *const known[] = {
                "path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid", NULL,
        };
        int r;

        r = cdi_known_fields(o, path, known, why);
        if (r >= 0)
                r = cdi_field_integer(o, path, "major", INT64_MIN, INT64_MAX, why);
        if (r >= 0)
                r = cdi_field_integer(o, path, "minor", INT64_MIN, INT64_MAX, why);
        if (r >= 0)
                r = cdi_field_integer(o, path, "fileMode", 0, UINT32_MAX, why);
        if (r >= 0)
                r = cdi_field_integer(o, path, "uid", 0, UINT32_MAX, why);
        if (r >= 0)
                r = cdi_field_integer(o, path, "gid", 0, UINT32_MAX, why);
        return r;
}

static int parse_node(CdiEditSet *e, json_object *o, const char *path, char **why) {
        const char *dest, *host, *type, *perms;
        CdiNode *nodes;
        int r;

        r = cdi_expect(o, json_type_object, path, why);
        if (r >= 0)
                r = check_node_fields(o, path, why);
        if (r >= 0)
                r = cdi_field_string(o, path, "path", true, &dest, why);
        if (r >= 0)
                r = cdi_field_string(o, path, "hostPath", false, &host, why);
        if (r >= 0)
                r = cdi_field_string(o, path, "type", false, &type, why);
        if (r >= 0)
                r = cdi_field_string(o, path, "permissions", false, &perms, why);
        if (r < 0)
                return r;

        if (!path_device(dest))
                return refuse_value(e, path, ".path", dest, "is not a normalised absolute path below /dev/");
        if (host && !path_device(host))
                return refuse_value(e, path, ".hostPath", host,
                                    "is not a normalised absolute path below /dev/ (a device node is bound writable)");
        if (type && streq(type, "p"))
                return refuse(e, "%s.type: a FIFO ('p') is not a device node a sandbox can be given", path);
        if (type && !streq(type, "c") && !streq(type, "b"))
                return refuse_value(e, path, ".type", type, "is not a device type a sandbox can be given (only 'c' and 'b')");
        if (perms && perms[strspn(perms, "rwm")] != '\0')
                return refuse(e, "%s.permissions: only 'r', 'w' and 'm'", path);
        if (e->refusal)
                return 0;

        nodes = reallocarray(e->nodes, e->n_nodes + 1, sizeof(CdiNode));
        if (!nodes)
                return -ENOMEM;
        e->nodes = nodes;
        e->nodes[e->n_nodes] = (CdiNode) { .host_path = strdup(host ?: dest), .path = strdup(dest) };
        if (!e->nodes[e->n_nodes].host_path || !e->nodes[e->n_nodes].path) {
                cdi_node_done(&e->nodes[e->n_nodes]);
                return -ENOMEM;
        }
        e->n_nodes++;
        return 0;
}

/* Mount options a read-only bind can honour (propagation is bwrap's own). */
static const char *const mount_options[] = {
        "ro", "nosuid", "nodev", "noexec", "bind", "rbind", "private", "rprivate", "slave", "rslave",
};

static int check_mount_options(CdiEditSet *e, json_object *o, const char *path, char **why) {
        _cleanup_free_ char *p = cdi_path_join(path, "options");
        json_object *a;
        size_t n;
        int r;

        if (!p)
                return -ENOMEM;
        if (!json_object_object_get_ex(o, "options", &a))
                return 0;
        r = cdi_check_string_array(a, p, why);
        if (r < 0)
                return r;
        n = json_object_array_length(a);
        for (size_t i = 0; i < n; i++) {
                const char *opt = json_object_get_string(json_object_array_get_idx(a, i));
                _cleanup_free_ char *q = NULL;
                bool ok = false;

                for (size_t j = 0; j < ELEMENTSOF(mount_options) && !ok; j++)
                        ok = streq(opt, mount_options[j]);
                if (ok)
                        continue;
                q = cdi_path_index(p, i);
                if (!q)
                        return -ENOMEM;
                return refuse_value(e, q, "", opt, streq(opt, "rw") ? "(read-write): mounts are bound read-only in a sandbox" :
                                    "is not a mount option a read-only bind can honour");
        }
        return 0;
}

static int parse_mount(CdiEditSet *e, json_object *o, const char *path, char **why) {
        static const char *const known[] = { "hostPath", "containerPath", "options", "type", NULL };
        const char *host, *dest, *type;
        CdiMount *mounts;
        int r;

        r = cdi_expect(o, json_type_object, path, why);
        if (r >= 0)
                r = cdi_known_fields(o, path, known, why);
        if (r >= 0)
                r = cdi_field_string(o, path, "hostPath", true, &host, why);
        if (r >= 0)
                r = cdi_field_string(o, path, "containerPath", true, &dest, why);
        if (r >= 0)
                r = cdi_field_string(o, path, "type", false, &type, why);
        if (r >= 0)
                r = check_mount_options(e, o, path, why);
        if (r < 0)
                return r;

        if (!path_normalised(host))
                return refuse_value(e, path, ".hostPath", host, "is not a normalised absolute path");
        if (!path_normalised(dest))
                return refuse_value(e, path, ".containerPath", dest, "is not a normalised absolute path");
        if (type && !streq(type, "bind"))
                return refuse_value(e, path, ".type", type, "mounts cannot be given to a sandbox (only bind mounts)");
        if (!sandbox_bind_dest_valid(dest)) {
                if (!path_visible(dest) || !streq(host, dest))
                        return refuse_value(e, path, ".containerPath", dest,
                                            "cannot be bound in a sandbox (it is at or below what the sandbox's "
                                            "shape owns: /, /usr, /proc, /dev, /workspace, ...)");
                /* The host's own file, where every sandbox already shows it read-only. */
                return e->refusal ? 0 : strv_extend(&e->visible, dest);
        }
        if (e->refusal)
                return 0;

        mounts = reallocarray(e->mounts, e->n_mounts + 1, sizeof(CdiMount));
        if (!mounts)
                return -ENOMEM;
        e->mounts = mounts;
        e->mounts[e->n_mounts] = (CdiMount) { .host_path = strdup(host), .container_path = strdup(dest) };
        if (!e->mounts[e->n_mounts].host_path || !e->mounts[e->n_mounts].container_path) {
                cdi_mount_done(&e->mounts[e->n_mounts]);
                return -ENOMEM;
        }
        e->n_mounts++;
        return 0;
}

/* "hooks": checked as strictly as the rest, and refused when there is one. */
static int parse_hooks(CdiEditSet *e, json_object *a, const char *path, char **why) {
        static const char *const known[] = { "hookName", "path", "args", "env", "timeout", NULL };
        size_t n;
        int r;

        r = cdi_check_array(a, path, CDI_EDITS_MAX, &n, why);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *p = cdi_path_index(path, i), *pa = NULL, *pe = NULL;
                json_object *h = json_object_array_get_idx(a, i), *v;
                const char *s;

                if (!p)
                        return -ENOMEM;
                r = cdi_expect(h, json_type_object, p, why);
                if (r >= 0)
                        r = cdi_known_fields(h, p, known, why);
                if (r >= 0)
                        r = cdi_field_string(h, p, "hookName", true, &s, why);
                if (r >= 0)
                        r = cdi_field_string(h, p, "path", true, &s, why);
                if (r >= 0)
                        r = cdi_field_integer(h, p, "timeout", 1, INT32_MAX, why);
                pa = cdi_path_join(p, "args");
                pe = cdi_path_join(p, "env");
                if (!pa || !pe)
                        return -ENOMEM;
                if (r >= 0 && json_object_object_get_ex(h, "args", &v))
                        r = cdi_check_string_array(v, pa, why);
                if (r >= 0 && json_object_object_get_ex(h, "env", &v))
                        r = cdi_check_string_array(v, pe, why);
        }
        if (r >= 0 && n > 0)
                r = refuse(e, "%s: hooks run host programs at container lifecycle points; a sandbox cannot run them",
                           path);
        return r;
}

static int parse_gids(CdiEditSet *e, json_object *a, const char *path, char **why) {
        size_t n;
        int r;

        r = cdi_check_array(a, path, CDI_EDITS_MAX, &n, why);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *p = cdi_path_index(path, i);
                json_object *g = json_object_array_get_idx(a, i);

                if (!p)
                        return -ENOMEM;
                r = cdi_expect(g, json_type_int, p, why);
                if (r >= 0 && (json_object_get_int64(g) < 0 || json_object_get_int64(g) > UINT32_MAX))
                        r = set_message(why, -EBADMSG, "%s: out of range", p);
        }
        if (r >= 0 && n > 0)
                r = refuse(e, "%s: a sandbox runs as one user in one group; additional groups cannot be given", path);
        return r;
}

static int parse_intel_rdt(CdiEditSet *e, json_object *o, const char *path, char **why) {
        static const char *const known[] = {
                "closID", "l3CacheSchema", "memBwSchema", "schemata", "enableCMT", "enableMBM", "enableMonitoring",
                NULL,
        };
        int r;

        r = cdi_expect(o, json_type_object, path, why);
        if (r >= 0)
                r = cdi_known_fields(o, path, known, why);
        if (r >= 0)
                r = refuse(e, "%s: Intel RDT (cache and memory bandwidth allocation) cannot be applied to a sandbox",
                           path);
        return r;
}

/* Each entry of the array field @key of @o through @parse_one (with its JSON path). */
static int parse_list(CdiEditSet *e, json_object *o, const char *path, const char *key,
                      int (*parse_one)(CdiEditSet *, json_object *, const char *, char **), char **why) {
        _cleanup_free_ char *p = cdi_path_join(path, key);
        json_object *a;
        size_t n;
        int r;

        if (!p)
                return -ENOMEM;
        if (!json_object_object_get_ex(o, key, &a))
                return 0;
        r = cdi_check_array(a, p, CDI_EDITS_MAX, &n, why);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *q = cdi_path_index(p, i);

                if (!q)
                        return -ENOMEM;
                r = parse_one(e, json_object_array_get_idx(a, i), q, why);
        }
        return r;
}

/* A field of @o given whole to @parse (with its JSON path), if present. */
static int parse_field(CdiEditSet *e, json_object *o, const char *path, const char *key,
                       int (*parse)(CdiEditSet *, json_object *, const char *, char **), char **why) {
        _cleanup_free_ char *p = cdi_path_join(path, key);
        json_object *v;

        if (!p)
                return -ENOMEM;
        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        return parse(e, v, p, why);
}

/* One "containerEdits" object at @path: hooks first, as the most fundamental refusal. */
int cdi_edits_parse(CdiEditSet *e, json_object *o, const char *path, char **why) {
        static const char *const known[] = {
                "env", "deviceNodes", "mounts", "hooks", "additionalGids", "intelRdt", NULL,
        };
        int r;

        r = cdi_expect(o, json_type_object, path, why);
        if (r >= 0)
                r = cdi_known_fields(o, path, known, why);
        if (r >= 0)
                r = parse_field(e, o, path, "hooks", parse_hooks, why);
        if (r >= 0)
                r = parse_field(e, o, path, "additionalGids", parse_gids, why);
        if (r >= 0)
                r = parse_field(e, o, path, "intelRdt", parse_intel_rdt, why);
        if (r >= 0)
                r = parse_list(e, o, path, "deviceNodes", parse_node, why);
        if (r >= 0)
                r = parse_list(e, o, path, "mounts", parse_mount, why);
        if (r >= 0)
                r = parse_field(e, o, path, "env", parse_env, why);
        return r;
}

