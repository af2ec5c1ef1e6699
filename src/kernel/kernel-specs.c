/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The kernelspecs (docs/kernels.md): `python3`, the host's python3 with Debian's ipykernel; and
 * one per ready managed environment that has a kernel (DESIGN.md §14): a python environment with
 * ipykernel in it under the environment's own name (python-base), an R one with IRkernel under
 * its name, r-base also as `ir` (IRkernel's own spec name). A kernel of an environment runs as a
 * run naming that environment does: its prefix bound read-only at /opt/science-env, first on
 * PATH, the host's interpreters covered.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "environment/env-manager.h"
#include "execution/execution.h"
#include "kernel/kernel-internal.h"
#include "util/json-util.h"
#include "util/log.h"

#define KERNEL_SPEC_IR "ir"
#define KERNEL_ENV_IR "r-base"

static char *const argv_ipykernel[] = {
        (char *) "python3", (char *) "-m", (char *) "ipykernel_launcher", (char *) "-f", (char *) "{connection_file}", NULL,
};
static char *const argv_irkernel[] = {
        (char *) "R", (char *) "--slave", (char *) "-e", (char *) "IRkernel::main()", (char *) "--args",
        (char *) "{connection_file}", NULL,
};

char *const *kernel_spec_argv(bool r) {
        return r ? argv_irkernel : argv_ipykernel;
}

static json_object *spec_json(const char *name, const char *display, bool r, const char *environment) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *spec = json_object_new_object(),
                                                *meta = json_object_new_object();

        if (!o || !spec || !meta ||
            (environment && json_add(meta, "environment", json_object_new_string(environment)) < 0) ||
            json_add(spec, "argv", json_strv_new(kernel_spec_argv(r))) < 0 ||
            json_add(spec, "display_name", json_object_new_string(display)) < 0 ||
            json_add(spec, "language", json_object_new_string(r ? "R" : "python")) < 0 ||
            /* ipykernel answers interrupt_request itself; IRkernel takes SIGINT (our fallback). */
            json_add(spec, "interrupt_mode", json_object_new_string(r ? "signal" : "message")) < 0 ||
            json_add(spec, "env", json_object_new_object()) < 0 ||
            json_add(spec, "metadata", STEAL(meta)) < 0 ||
            json_add(o, "name", json_object_new_string(name)) < 0 ||
            json_add(o, "spec", STEAL(spec)) < 0 ||
            json_add(o, "resources", json_object_new_object()) < 0)
                return NULL;
        return STEAL(o);
}

/* Does the environment's live revision hold the kernel package of its kind? */
static bool env_has_kernel(json_object *env, bool r) {
        json_object *pkgs, *v;

        if (!json_object_object_get_ex(env, "packages", &pkgs) || !json_object_is_type(pkgs, json_type_array))
                return false;
        for (size_t i = 0; i < json_object_array_length(pkgs); i++)
                if (json_object_object_get_ex(json_object_array_get_idx(pkgs, i), "name", &v) &&
                    strcasecmp(json_object_get_string(v) ?: "", r ? "IRkernel" : "ipykernel") == 0)
                        return true;
        return false;
}

/* Calls @fn for every environment kernelspec (spec name, environment, R?) until it returns true. */
static bool for_each_env_spec(KernelManager *km, bool (*fn)(const char *, const char *, bool, void *), void *ud) {
        _cleanup_(json_object_putp) json_object *list = km->environments ? env_manager_list_json(km->environments) : NULL;
        json_object *envs, *v;

        if (!list || !json_object_object_get_ex(list, "environments", &envs))
                return false;
        for (size_t i = 0; i < json_object_array_length(envs); i++) {
                json_object *e = json_object_array_get_idx(envs, i);
                const char *name, *kind, *state;
                bool r;

                name = json_object_object_get_ex(e, "name", &v) ? json_object_get_string(v) : NULL;
                kind = json_object_object_get_ex(e, "kind", &v) ? json_object_get_string(v) : NULL;
                state = json_object_object_get_ex(e, "state", &v) ? json_object_get_string(v) : NULL;
                if (!name || !kind || !state || !streq(state, "ready") || streq(name, KERNEL_SPEC_DEFAULT))
                        continue;
                if (!streq(kind, "python") && !streq(kind, "r"))
                        continue;
                r = streq(kind, "r");
                if (!env_has_kernel(e, r))
                        continue;
                if (fn(name, name, r, ud))
                        return true;
                if (r && streq(name, KERNEL_ENV_IR) && fn(KERNEL_SPEC_IR, name, r, ud))
                        return true;
        }
        return false;
}

typedef struct SpecFind {
        const char *name;                /* a spec's name, or NULL: */
        const char *environment;         /* ... the kernel of this environment */
        json_object *list;               /* or: add every spec here */
        char *found_env;
        bool found_r;
        bool found;
} SpecFind;

static bool spec_visit(const char *spec, const char *env, bool r, void *userdata) {
        SpecFind *f = userdata;

        if (f->list) {
                char display[160];

                (void) snprintf(display, sizeof(display), "%s (environment %s)", r ? "R (IRkernel)" : "Python 3 (ipykernel)", env);
                (void) json_add(f->list, spec, spec_json(spec, display, r, env));
                return false;
        }
        if ((f->name && streq(f->name, spec)) || (!f->name && f->environment && streq(f->environment, env))) {
                f->found_env = strdup(env);
                f->found_r = r;
                f->found = true;
                return true;
        }
        return false;
}

json_object *kernel_manager_spec(KernelManager *km, const char *name) {
        _cleanup_(json_object_putp) json_object *all = NULL;
        json_object *v;

        if (!name)
                return NULL;
        if (streq(name, KERNEL_SPEC_DEFAULT))
                return spec_json(KERNEL_SPEC_DEFAULT, "Python 3 (ipykernel)", false, NULL);
        all = json_object_new_object();
        if (!all)
                return NULL;
        (void) for_each_env_spec(km, spec_visit, &(SpecFind) { .list = all });
        if (!json_object_object_get_ex(all, name, &v))
                return NULL;
        return json_object_get(v);
}

json_object *kernel_manager_specs(KernelManager *km) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *specs = json_object_new_object();

        if (!o || !specs ||
            json_add(specs, KERNEL_SPEC_DEFAULT, spec_json(KERNEL_SPEC_DEFAULT, "Python 3 (ipykernel)", false, NULL)) < 0)
                return NULL;
        (void) for_each_env_spec(km, spec_visit, &(SpecFind) { .list = specs });
        if (json_add(o, "default", json_object_new_string(KERNEL_SPEC_DEFAULT)) < 0 ||
            json_add(o, "kernelspecs", STEAL(specs)) < 0)
                return NULL;
        return STEAL(o);
}

int kernel_spec_resolve(KernelManager *km, const char *name, const char *environment, KernelSpecChoice *ret,
                        char **ret_error) {
        SpecFind f = { .name = name, .environment = environment };

        *ret = (KernelSpecChoice) {};
        if ((!name || streq(name, KERNEL_SPEC_DEFAULT)) && !environment)
                return 0;
        if (name && streq(name, KERNEL_SPEC_DEFAULT))
                f.name = NULL;   /* python3 + "environment": that environment's kernel */
        if (!for_each_env_spec(km, spec_visit, &f)) {
                if (ret_error && asprintf(ret_error, environment && !f.name ?
                                          "environment '%.64s' is not ready or has no kernel" :
                                          "no such kernel: '%.64s'", environment && !f.name ? environment : name) < 0)
                        *ret_error = NULL;
                return -ENOENT;
        }
        if (environment && !streq(environment, f.found_env)) {
                if (ret_error && asprintf(ret_error, "kernel '%.64s' is of environment '%s', not '%.64s'", name,
                                          f.found_env, environment) < 0)
                        *ret_error = NULL;
                free(f.found_env);
                return -EINVAL;
        }
        *ret = (KernelSpecChoice) { .spec = f.name ? name : f.found_env, .environment = f.found_env, .r = f.found_r };
        return 0;
}

static void release_environment(void *hold) {
        env_hold_release(hold);
}

int kernel_use_environment(Kernel *k, Execution *e, char **ret_error) {
        KernelManager *km = k->manager;
        EnvRefusal refusal = 0;
        EnvHold *hold = NULL;
        char *why = NULL;
        int r;

        if (!k->environment)
                return 0;
        if (!km->environments)
                return -ENOENT;
        r = env_manager_acquire(km->environments, k->environment, &hold, &refusal, &why);
        if (r < 0) {
                if (ret_error && !*ret_error)
                        *ret_error = why;
                else
                        free(why);
                return r == -ENOMEM ? r : -ENOENT;
        }
        execution_set_environment(e, &(ExecutionEnv) {
                                             .hold = hold,
                                             .release = release_environment,
                                             .name = env_hold_name(hold),
                                             .revision = env_hold_revision(hold),
                                             .prefix = env_hold_prefix(hold),
                                             .hide_file = env_hold_cover(hold),
                                             .r = env_hold_kind(hold) == ENV_KIND_R,
                                     });
        return 0;
}
