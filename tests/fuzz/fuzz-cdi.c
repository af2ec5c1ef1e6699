/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * CDI specs (src/npu/cdi*.c): the input is one spec in JSON form. Invariants: cdi_spec_parse()
 * answers 0 or -EBADMSG, with a reason when it refuses. An accepted spec's devices all have valid
 * fully-qualified names; resolving each of them alone, and all of them together, either succeeds
 * with every node (host and sandbox side) below /dev/, every mount destination accepted by
 * sandbox_bind_dest_valid(), every variable's name by sandbox_env_name_valid(), and nothing twice,
 * or fails with a reason: -EPERM exactly for the devices that the registry lists as refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "npu/cdi.h"
#include "sandbox/sandbox-argv.h"
#include "util/macro.h"
#include "util/strv.h"

/* Absolute, and no component is "", "." or "..": nothing can climb out of /dev/. */
static bool normalised(const char *p) {
        if (p[0] != '/')
                return false;
        for (const char *c = p + 1;;) {
                size_t l = strcspn(c, "/");

                if (l == 0 || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                c += l;
                if (*c == '\0')
                        return true;
                c++;
        }
}

static void check_edits(const CdiEdits *e) {
        for (size_t i = 0; i < e->n_nodes; i++) {
                FUZZ_CHECK(strncmp(e->nodes[i].path, "/dev/", 5) == 0 && e->nodes[i].path[5] != '\0');
                FUZZ_CHECK(strncmp(e->nodes[i].host_path, "/dev/", 5) == 0);
                FUZZ_CHECK(normalised(e->nodes[i].path) && normalised(e->nodes[i].host_path));
                FUZZ_CHECK(i == 0 || strcmp(e->nodes[i - 1].path, e->nodes[i].path) < 0);
        }
        for (size_t i = 0; i < e->n_mounts; i++) {
                FUZZ_CHECK(sandbox_bind_dest_valid(e->mounts[i].container_path));
                FUZZ_CHECK(normalised(e->mounts[i].host_path) || streq(e->mounts[i].host_path, "/"));
                FUZZ_CHECK(i == 0 || strcmp(e->mounts[i - 1].container_path, e->mounts[i].container_path) < 0);
        }
        STRV_FOREACH(s, e->env) {
                const char *eq = strchr(*s, '=');
                char *name;

                FUZZ_CHECK(eq);
                name = strndup(*s, (size_t) (eq - *s));
                FUZZ_CHECK(name);
                FUZZ_CHECK(sandbox_env_name_valid(name));
                free(name);
        }
        STRV_FOREACH(s, e->visible)
                FUZZ_CHECK((*s)[0] == '/' && !sandbox_bind_dest_valid(*s));
}

static bool refused(const CdiRegistry *reg, const char *name) {
        const char *const *what, *const *why;
        size_t n = cdi_registry_refusals(reg, &what, &why);

        for (size_t i = 0; i < n; i++) {
                FUZZ_CHECK(what[i] && why[i] && *why[i]);
                if (strcmp(what[i], name) == 0)
                        return true;
        }
        return false;
}

static void check_resolve(const CdiRegistry *reg, char *const *names, bool one) {
        CdiEdits e = {};
        char *why = NULL;
        int r;

        r = cdi_registry_resolve(reg, names, &e, &why);
        if (r == -ENOMEM)
                return;
        if (r == 0) {
                FUZZ_CHECK(!why);
                FUZZ_CHECK(!one || !refused(reg, names[0]));
                check_edits(&e);
                cdi_edits_done(&e);
                return;
        }
        FUZZ_CHECK(r == -EPERM || r == -EINVAL);
        FUZZ_CHECK(why && *why);
        FUZZ_CHECK(!e.nodes && !e.mounts && !e.env && !e.visible);
        FUZZ_CHECK(!one || r == -EINVAL || refused(reg, names[0]));
        free(why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        CdiRegistry *reg = NULL;
        CdiSpec *spec = NULL;
        char **all = NULL;
        char *why = NULL;
        unsigned prec = 0;
        size_t n;
        int r;

        if (size > 256 * 1024)
                return 0;
        r = cdi_spec_parse((const char *) data, size, "fuzz.json", &spec, &why);
        if (r == -ENOMEM)
                return 0;
        FUZZ_CHECK(r == 0 || r == -EBADMSG);
        if (r < 0) {
                FUZZ_CHECK(why && *why && !spec);
                free(why);
                return 0;
        }
        FUZZ_CHECK(spec && !why);
        n = cdi_spec_n_devices(spec);
        FUZZ_CHECK(n >= 1 && n <= CDI_DEVICES_MAX);

        all = calloc(n + 1, sizeof(char *));
        FUZZ_CHECK(all);
        for (size_t i = 0; i < n; i++) {
                FUZZ_CHECK(asprintf(&all[i], "%s=%s", cdi_spec_kind(spec), cdi_spec_device(spec, i, NULL)) >= 0);
                FUZZ_CHECK(cdi_device_name_valid(all[i]));
        }
        FUZZ_CHECK(cdi_registry_new_from_specs(&spec, &prec, 1, &reg) == 0);
        for (size_t i = 0; i < n; i++) {
                char *one[] = { all[i], NULL };

                check_resolve(reg, one, true);
        }
        if (n <= CDI_RESOLVE_NAMES_MAX)
                check_resolve(reg, all, false);
        cdi_registry_free(reg);
        strv_free(all);
        return 0;
}
