/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The CDI registry: the specs of the spec directories by precedence, the usable devices and the
 * refusals, and the resolution of device names into one set of sandbox edits, all or nothing.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "npu/cdi-internal.h"
#include "npu/cdi.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/strv.h"

/* One device name of the registry and the definition that won it. */
typedef struct CdiEntry {
        char *qualified;                /* "vendor/class=name" */
        const CdiSpec *spec;
        const CdiDevice *device;
        unsigned precedence;
        size_t order;                   /* of the definitions: earlier spec, earlier device first */
        char *conflict;                 /* two definitions of the same highest precedence */
} CdiEntry;

struct CdiRegistry {
        CdiSpec **specs;
        unsigned *precedence;           /* of each spec */
        size_t n_specs;
        CdiEntry *entries;              /* sorted by name, one a name */
        size_t n_entries;
        char **what, **why;             /* refusals: two strvs of the same length */
        size_t n_refusals;
};

static bool entry_usable(const CdiEntry *e) {
        return !e->conflict && !e->device->edits.refusal;
}

static void entry_done(CdiEntry *e) {
        e->qualified = mfree(e->qualified);
        e->conflict = mfree(e->conflict);
}

CdiRegistry *cdi_registry_free(CdiRegistry *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n_entries; i++)
                entry_done(&r->entries[i]);
        free(r->entries);
        for (size_t i = 0; i < r->n_specs; i++)
                cdi_spec_free(r->specs[i]);
        free(r->specs);
        free(r->precedence);
        strv_free(r->what);
        strv_free(r->why);
        return mfree(r);
}

static int registry_refuse(CdiRegistry *r, const char *what, char *why) {
        _cleanup_free_ char *w = why;
        int k;

        if (!w)
                return -ENOMEM;
        k = strv_extend(&r->what, what);
        if (k < 0)
                return k;
        k = strv_consume(&r->why, STEAL(w));
        if (k < 0) {
                /* Keep the two lists the same length. */
                free(r->what[r->n_refusals]);
                r->what[r->n_refusals] = NULL;
                return k;
        }
        r->n_refusals++;
        return 0;
}

static char *message(const char *fmt, ...) _printf_(1, 2);
static char *message(const char *fmt, ...) {
        va_list ap;
        char *s = NULL;

        va_start(ap, fmt);
        if (set_messagev(&s, 0, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        return s;
}

/* Append @spec (taken over, freed on failure) with @precedence. */
static int registry_add_spec(CdiRegistry *r, CdiSpec *spec, unsigned precedence) {
        _cleanup_(cdi_spec_freep) CdiSpec *s = spec;
        CdiSpec **specs;
        unsigned *prec;

        specs = reallocarray(r->specs, r->n_specs + 1, sizeof(CdiSpec *));
        if (!specs)
                return -ENOMEM;
        r->specs = specs;
        prec = reallocarray(r->precedence, r->n_specs + 1, sizeof(unsigned));
        if (!prec)
                return -ENOMEM;
        r->precedence = prec;
        r->specs[r->n_specs] = STEAL(s);
        r->precedence[r->n_specs++] = precedence;
        return 0;
}

/* ---- the index ---------------------------------------------------------------------------------- */

static int entry_cmp(const void *a, const void *b) {
        const CdiEntry *x = a, *y = b;
        int c = strcmp(x->qualified, y->qualified);

        if (c != 0)
                return c;
        if (x->precedence != y->precedence)
                return x->precedence > y->precedence ? -1 : 1;         /* the highest first */
        return x->order < y->order ? -1 : x->order > y->order;
}

static const char *origin_of(const CdiSpec *s) {
        return s->origin ?: "(a spec without a file)";
}

/* Every definition of every spec, sorted by name and by precedence. */
static int index_collect(CdiRegistry *r, CdiEntry **ret, size_t *ret_n) {
        CdiEntry *all;
        size_t total = 0, n = 0;

        for (size_t i = 0; i < r->n_specs; i++)
                total += r->specs[i]->n_devices;
        all = calloc(MAX(total, (size_t) 1), sizeof(CdiEntry));
        if (!all)
                return -ENOMEM;
        for (size_t i = 0; i < r->n_specs; i++)
                for (size_t j = 0; j < r->specs[i]->n_devices; j++) {
                        const CdiSpec *s = r->specs[i];

                        all[n] = (CdiEntry) {
                                .spec = s,
                                .device = &s->devices[j],
                                .precedence = r->precedence[i],
                                .order = n,
                        };
                        all[n].qualified = message("%s=%s", s->kind, s->devices[j].name);
                        if (!all[n].qualified) {
                                for (size_t k = 0; k < n; k++)
                                        entry_done(&all[k]);
                                free(all);
                                return -ENOMEM;
                        }
                        n++;
                }
        qsort(all, n, sizeof(CdiEntry), entry_cmp);
        *ret = all;
        *ret_n = n;
        return 0;
}

/* One entry a name: the first definition of highest precedence; a second one of that precedence
 * is a conflict. Then the refusals of the devices, by name. */
static int registry_index(CdiRegistry *r) {
        CdiEntry *all;
        size_t n, kept = 0;
        int k;

        k = index_collect(r, &all, &n);
        if (k < 0)
                return k;
        /* Owned by @r from here: an entry is either whole or zeroed, so a failure frees it all. */
        r->entries = all;
        r->n_entries = n;
        for (size_t i = 0; i < n; ) {
                size_t j = i + 1;

                if (j < n && streq(all[j].qualified, all[i].qualified) && all[j].precedence == all[i].precedence) {
                        all[i].conflict = message("defined twice at the same precedence, in '%s' and '%s'",
                                                  origin_of(all[i].spec), origin_of(all[j].spec));
                        if (!all[i].conflict)
                                return -ENOMEM;
                }
                for (; j < n && streq(all[j].qualified, all[i].qualified); j++)
                        entry_done(&all[j]);            /* shadowed, or the conflict's other half */
                if (kept != i) {
                        all[kept] = all[i];
                        all[i] = (CdiEntry) {};
                }
                kept++;
                i = j;
        }
        r->n_entries = kept;

        for (size_t i = 0; i < kept; i++) {
                CdiEntry *e = &all[i];

                if (entry_usable(e))
                        continue;
                k = registry_refuse(r, e->qualified, e->conflict ? strdup(e->conflict) :
                                    message("%s: %s", origin_of(e->spec), e->device->edits.refusal));
                if (k < 0)
                        return k;
        }
        return 0;
}

int cdi_registry_new_from_specs(CdiSpec **specs, const unsigned *precedence, size_t n, CdiRegistry **ret) {
        _cleanup_(cdi_registry_freep) CdiRegistry *r = NULL;
        int k = 0;

        r = calloc(1, sizeof(CdiRegistry));
        for (size_t i = 0; i < n; i++) {
                CdiSpec *s = STEAL(specs[i]);

                if (!r || k < 0)
                        cdi_spec_free(s);
                else
                        k = registry_add_spec(r, s, precedence[i]);
        }
        if (!r)
                return -ENOMEM;
        if (k >= 0)
                k = registry_index(r);
        if (k < 0)
                return k;
        *ret = STEAL(r);
        return 0;
}

/* ---- loading ------------------------------------------------------------------------------------ */

static bool has_suffix(const char *s, const char *suffix) {
        size_t n = strlen(s), l = strlen(suffix);

        return n > l && streq(s + n - l, suffix);
}

/* One spec file @name of @dfd (the directory @dir). Return: 0 (read, or refused), or -ENOMEM. */
static int load_file(CdiRegistry *r, int dfd, const char *dir, const char *name, unsigned precedence) {
        _cleanup_free_ char *path = NULL, *text = NULL, *why = NULL;
        CdiSpec *spec;
        size_t size;
        int k;

        path = message("%s/%s", dir, name);
        if (!path)
                return -ENOMEM;
        if (has_suffix(name, ".yaml") || has_suffix(name, ".yml"))
                return registry_refuse(r, path, strdup("YAML specs are not read: write the spec as JSON "
                                                       "(nvidia-ctk cdi generate --format=json)"));
        /* Symlinks are followed (packages link specs into the directories, which belong to root);
         * O_NONBLOCK: a FIFO is refused by fstat() instead of blocking the open. */
        k = read_file_limited(dfd, name, O_NONBLOCK, CDI_SPEC_SIZE_MAX, 0, &text, &size);
        if (k == -ENOMEM)
                return k;
        if (k == -EFBIG)
                return registry_refuse(r, path, message("the spec is larger than %zu bytes", CDI_SPEC_SIZE_MAX));
        if (k == -EBADFD)
                return registry_refuse(r, path, strdup("not a regular file"));
        if (k < 0)
                return registry_refuse(r, path, message("cannot be read: %s", strerror(-k)));

        k = cdi_spec_parse(text, size, path, &spec, &why);
        if (k == -EBADMSG)
                return registry_refuse(r, path, STEAL(why));
        if (k < 0)
                return k;
        return registry_add_spec(r, spec, precedence);
}

static int load_dir(CdiRegistry *r, const char *dir, unsigned precedence) {
        _cleanup_(dir_names_done) DirNames names = {};
        _cleanup_close_ int dfd = -EBADF;
        uint64_t counter = 0;
        int k;

        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 && errno == ENOENT)
                return 0;               /* a missing directory is no error: nothing is installed */
        if (dfd < 0)
                return registry_refuse(r, dir, message("the directory cannot be opened: %s", strerror(errno)));
        k = dir_read_names(dfd, &counter, CDI_DIR_ENTRIES_MAX, &names);
        if (k == -ENOMEM)
                return k;
        if (k == -E2BIG)
                return registry_refuse(r, dir, message("more than %d entries (or a name over 255 bytes): "
                                                       "the directory is not read", CDI_DIR_ENTRIES_MAX));
        if (k < 0)
                return registry_refuse(r, dir, message("the directory cannot be read: %s", strerror(-k)));
        for (size_t i = 0; i < names.n; i++) {
                if (!has_suffix(names.v[i], ".json") && !has_suffix(names.v[i], ".yaml") &&
                    !has_suffix(names.v[i], ".yml"))
                        continue;
                k = load_file(r, dfd, dir, names.v[i], precedence);
                if (k < 0)
                        return k;
        }
        return 0;
}

int cdi_registry_load(char *const *dirs, CdiRegistry **ret) {
        _cleanup_(cdi_registry_freep) CdiRegistry *r = NULL;
        unsigned precedence = 0;
        int k;

        r = calloc(1, sizeof(CdiRegistry));
        if (!r)
                return -ENOMEM;
        STRV_FOREACH(d, (char **) dirs) {
                k = load_dir(r, *d, precedence++);
                if (k < 0)
                        return k;
        }
        k = registry_index(r);
        if (k < 0)
                return k;
        *ret = STEAL(r);
        return 0;
}

/* ---- queries ------------------------------------------------------------------------------------ */

char **cdi_registry_devices(const CdiRegistry *reg) {
        _cleanup_strv_free_ char **l = NULL;
        size_t n = 0;

        l = calloc(reg->n_entries + 1, sizeof(char *));
        if (!l)
                return NULL;
        for (size_t i = 0; i < reg->n_entries; i++) {
                if (!entry_usable(&reg->entries[i]))
                        continue;
                l[n] = strdup(reg->entries[i].qualified);
                if (!l[n++])
                        return NULL;
        }
        return STEAL(l);
}

size_t cdi_registry_refusals(const CdiRegistry *reg, const char *const **ret_what, const char *const **ret_why) {
        static const char *const none[] = { NULL };

        if (ret_what)
                *ret_what = reg->what ? (const char *const *) reg->what : none;
        if (ret_why)
                *ret_why = reg->why ? (const char *const *) reg->why : none;
        return reg->n_refusals;
}

static int entry_key_cmp(const void *key, const void *elem) {
        return strcmp(key, ((const CdiEntry *) elem)->qualified);
}

static const CdiEntry *registry_find(const CdiRegistry *reg, const char *name) {
        if (reg->n_entries == 0)
                return NULL;
        return bsearch(name, reg->entries, reg->n_entries, sizeof(CdiEntry), entry_key_cmp);
}

/* ---- resolving ---------------------------------------------------------------------------------- */

void cdi_edits_done(CdiEdits *e) {
        cdi_edit_lists_free(e->nodes, e->n_nodes, e->mounts, e->n_mounts, e->env, e->visible);
        *e = (CdiEdits) {};
}

/* The edit sets of the devices picked, borrowed: each spec's own before its first device's. */
typedef struct Plan {
        const CdiEditSet **sets;
        size_t n_sets;
        size_t n_nodes, n_mounts, n_env, n_visible;
} Plan;

static void plan_done(Plan *p) {
        p->sets = mfree(p->sets);
}

static int plan_make(const CdiEntry *const *picked, size_t n, Plan *ret) {
        Plan p = {};

        p.sets = calloc(2 * MAX(n, (size_t) 1), sizeof(CdiEditSet *));
        if (!p.sets)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                bool seen = false;

                for (size_t j = 0; j < i && !seen; j++)
                        seen = picked[j]->spec == picked[i]->spec;
                if (!seen)
                        p.sets[p.n_sets++] = &picked[i]->spec->edits;
                p.sets[p.n_sets++] = &picked[i]->device->edits;
        }
        for (size_t i = 0; i < p.n_sets; i++) {
                p.n_nodes += p.sets[i]->n_nodes;
                p.n_mounts += p.sets[i]->n_mounts;
                p.n_env += strv_length(p.sets[i]->env);
                p.n_visible += strv_length(p.sets[i]->visible);
        }
        *ret = p;
        return 0;
}

static int node_cmp(const void *a, const void *b) {
        const CdiNode *x = *(const CdiNode *const *) a, *y = *(const CdiNode *const *) b;
        int c = strcmp(x->path, y->path);

        return c != 0 ? c : strcmp(x->host_path, y->host_path);
}

static int mount_cmp(const void *a, const void *b) {
        const CdiMount *x = *(const CdiMount *const *) a, *y = *(const CdiMount *const *) b;
        int c = strcmp(x->container_path, y->container_path);

        return c != 0 ? c : strcmp(x->host_path, y->host_path);
}

static int str_cmp(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* "NAME=VALUE" by NAME, then by value. */
static int env_cmp(const void *a, const void *b) {
        const char *x = *(const char *const *) a, *y = *(const char *const *) b;
        size_t nx = strcspn(x, "="), ny = strcspn(y, "=");
        int c = strncmp(x, y, MIN(nx, ny));

        if (c != 0)
                return c;
        if (nx != ny)
                return nx < ny ? -1 : 1;
        return strcmp(x + nx, y + ny);
}

static int resolve_nodes(const Plan *p, CdiEdits *edits, char **why) {
        _cleanup_free_ const CdiNode **all = calloc(MAX(p->n_nodes, (size_t) 1), sizeof(CdiNode *));
        size_t n = 0;

        if (!all)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_sets; i++)
                for (size_t j = 0; j < p->sets[i]->n_nodes; j++)
                        all[n++] = &p->sets[i]->nodes[j];
        qsort(all, n, sizeof(CdiNode *), node_cmp);
        edits->nodes = calloc(MAX(n, (size_t) 1), sizeof(CdiNode));
        if (!edits->nodes)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                CdiNode *last = edits->n_nodes > 0 ? &edits->nodes[edits->n_nodes - 1] : NULL;

                if (last && streq(last->path, all[i]->path)) {
                        if (streq(last->host_path, all[i]->host_path))
                                continue;
                        return set_message(why, -EINVAL, "the devices conflict: '%s' would be the host's '%s' and '%s'",
                                           last->path, last->host_path, all[i]->host_path);
                }
                edits->nodes[edits->n_nodes] = (CdiNode) {
                        .host_path = strdup(all[i]->host_path),
                        .path = strdup(all[i]->path),
                };
                edits->n_nodes++;
                if (!edits->nodes[edits->n_nodes - 1].host_path || !edits->nodes[edits->n_nodes - 1].path)
                        return -ENOMEM;
        }
        return 0;
}

static int resolve_mounts(const Plan *p, CdiEdits *edits, char **why) {
        _cleanup_free_ const CdiMount **all = calloc(MAX(p->n_mounts, (size_t) 1), sizeof(CdiMount *));
        size_t n = 0;

        if (!all)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_sets; i++)
                for (size_t j = 0; j < p->sets[i]->n_mounts; j++)
                        all[n++] = &p->sets[i]->mounts[j];
        /* Sorted by path: a parent comes before what is mounted below it. */
        qsort(all, n, sizeof(CdiMount *), mount_cmp);
        edits->mounts = calloc(MAX(n, (size_t) 1), sizeof(CdiMount));
        if (!edits->mounts)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                CdiMount *last = edits->n_mounts > 0 ? &edits->mounts[edits->n_mounts - 1] : NULL;

                if (last && streq(last->container_path, all[i]->container_path)) {
                        if (streq(last->host_path, all[i]->host_path))
                                continue;
                        return set_message(why, -EINVAL, "the devices conflict: '%s' would be the host's '%s' and '%s'",
                                           last->container_path, last->host_path, all[i]->host_path);
                }
                edits->mounts[edits->n_mounts] = (CdiMount) {
                        .host_path = strdup(all[i]->host_path),
                        .container_path = strdup(all[i]->container_path),
                };
                edits->n_mounts++;
                if (!edits->mounts[edits->n_mounts - 1].host_path || !edits->mounts[edits->n_mounts - 1].container_path)
                        return -ENOMEM;
        }
        return 0;
}

/* The @total environment entries (@env) or visible paths of the sets, sorted, without duplicates,
 * into a new strv; two entries of one variable with different values conflict. */
static int resolve_strings(const Plan *p, size_t total, bool env, char ***ret, char **why) {
        _cleanup_free_ const char **all = calloc(total + 1, sizeof(char *));
        _cleanup_strv_free_ char **l = calloc(total + 1, sizeof(char *));
        size_t n = 0, kept = 0;

        if (!all || !l)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_sets; i++)
                STRV_FOREACH(s, env ? p->sets[i]->env : p->sets[i]->visible)
                        all[n++] = *s;
        qsort(all, n, sizeof(char *), env ? env_cmp : str_cmp);
        for (size_t i = 0; i < n; i++) {
                if (kept > 0 && streq(l[kept - 1], all[i]))
                        continue;
                if (env && kept > 0) {
                        size_t a = strcspn(l[kept - 1], "="), b = strcspn(all[i], "=");

                        if (a == b && strneq(l[kept - 1], all[i], a))
                                return set_message(why, -EINVAL, "the devices conflict: they set '%.*s' to different "
                                                   "values", (int) a, all[i]);
                }
                l[kept] = strdup(all[i]);
                if (!l[kept++])
                        return -ENOMEM;
        }
        *ret = STEAL(l);
        return 0;
}

/* The registry's entries for @names, each once, or why not. */
static int resolve_pick(const CdiRegistry *reg, char *const *names, const CdiEntry ***ret, size_t *ret_n, char **why) {
        _cleanup_free_ const CdiEntry **picked = calloc(CDI_RESOLVE_NAMES_MAX, sizeof(CdiEntry *));
        size_t n = 0;

        if (!picked)
                return -ENOMEM;
        STRV_FOREACH(name, (char **) names) {
                _cleanup_free_ char *shown = str_escape_log(*name, 256);
                const CdiEntry *e;
                bool seen = false;

                if (!shown)
                        return -ENOMEM;
                if (!cdi_device_name_valid(*name))
                        return set_message(why, -EBADMSG, "'%s' is not a fully-qualified CDI device name "
                                           "(vendor.com/class=name)", shown);
                e = registry_find(reg, *name);
                if (!e)
                        return set_message(why, -ENOENT, "unknown CDI device '%s'", shown);
                if (!entry_usable(e))
                        return set_message(why, -EPERM, "the CDI device '%s' cannot be used in a sandbox: %s", shown,
                                           e->conflict ?: e->device->edits.refusal);
                for (size_t i = 0; i < n && !seen; i++)
                        seen = picked[i] == e;
                if (seen)
                        continue;
                if (n == CDI_RESOLVE_NAMES_MAX)
                        return set_message(why, -E2BIG, "more than %d CDI devices", CDI_RESOLVE_NAMES_MAX);
                picked[n++] = e;
        }
        *ret = STEAL(picked);
        *ret_n = n;
        return 0;
}

int cdi_registry_resolve(const CdiRegistry *reg, char *const *names, CdiEdits *ret, char **ret_why) {
        _cleanup_(cdi_edits_done) CdiEdits edits = {};
        _cleanup_(plan_done) Plan plan = {};
        _cleanup_free_ const CdiEntry **picked = NULL;
        _cleanup_free_ char *why = NULL;
        size_t n = 0;
        int k;

        k = resolve_pick(reg, names, &picked, &n, &why);
        if (k >= 0)
                k = plan_make(picked, n, &plan);
        if (k >= 0)
                k = resolve_nodes(&plan, &edits, &why);
        if (k >= 0)
                k = resolve_mounts(&plan, &edits, &why);
        if (k >= 0)
                k = resolve_strings(&plan, plan.n_env, true, &edits.env, &why);
        if (k >= 0)
                k = resolve_strings(&plan, plan.n_visible, false, &edits.visible, &why);
        if (k < 0) {
                if (k != -ENOMEM && ret_why)
                        *ret_why = STEAL(why);
                return k;
        }
        *ret = edits;
        edits = (CdiEdits) {};
        return 0;
}
