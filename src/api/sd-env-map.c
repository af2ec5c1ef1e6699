/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Names of the ScienceDiscovery dialect's environments and revisions, and of the packages their
 * install and uninstall name, in terms of ours (sd-env.h). Pure.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/sd-env.h"
#include "environment/env-store.h"
#include "util/macro.h"
#include "util/string-util.h"

static const struct {
        const char *ours, *theirs;
} starters[] = {
        { "python-base", "starter-python" },
        { "r-base", "starter-r" },
};

void sdp_env_id(const char *name, char ret[static SDP_ENV_ID_MAX]) {
        for (size_t i = 0; i < ELEMENTSOF(starters); i++)
                if (streq(name, starters[i].ours)) {
                        (void) snprintf(ret, SDP_ENV_ID_MAX, "%s", starters[i].theirs);
                        return;
                }
        (void) snprintf(ret, SDP_ENV_ID_MAX, "%s", name);
}

bool sdp_env_name(const char *id, char ret[static SDP_ENV_ID_MAX]) {
        for (size_t i = 0; i < ELEMENTSOF(starters); i++) {
                if (streq(id, starters[i].theirs)) {
                        (void) snprintf(ret, SDP_ENV_ID_MAX, "%s", starters[i].ours);
                        return true;
                }
                /* A base environment is only ever its starter id: one name each way. */
                if (streq(id, starters[i].ours))
                        return false;
        }
        if (strlen(id) >= SDP_ENV_ID_MAX || !env_name_valid(id) || strncmp(id, "starter-", 8) == 0)
                return false;
        strcpy(ret, id);
        return true;
}

void sdp_env_revision_id(const char *name, unsigned revision, char ret[static SDP_ENV_REVISION_ID_MAX]) {
        char id[SDP_ENV_ID_MAX];

        sdp_env_id(name, id);
        (void) snprintf(ret, SDP_ENV_REVISION_ID_MAX, "%s@%u", id, revision);
}

bool sdp_env_revision_parse(const char *rid, char ret_name[static SDP_ENV_ID_MAX], unsigned *ret_revision) {
        const char *at = rid ? strrchr(rid, '@') : NULL;
        char id[SDP_ENV_ID_MAX], *end;
        unsigned long n;

        if (!at || at == rid || (size_t) (at - rid) >= sizeof(id) || at[1] < '1' || at[1] > '9')
                return false;
        n = strtoul(at + 1, &end, 10);
        if (*end != '\0' || n > 1000000)
                return false;
        memcpy(id, rid, (size_t) (at - rid));
        id[at - rid] = '\0';
        if (!sdp_env_name(id, ret_name))
                return false;
        *ret_revision = (unsigned) n;
        return true;
}

static bool name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.';
}

bool sdp_env_spec_name(const char *spec, bool wheel, char *ret, size_t size) {
        size_t n = 0;
        bool sep = false;

        if (!spec || size == 0)
                return false;
        spec += strspn(spec, " \t");
        /* A wheel's file name is "<name>-<version>-...": its name ends at the first '-'. */
        for (const char *p = spec; *p && name_char(*p) && !(wheel && *p == '-'); p++) {
                if (*p == '-' || *p == '_' || *p == '.') {
                        sep = n > 0;
                        continue;
                }
                if (n + (sep ? 2 : 1) >= size)
                        return false;
                if (sep)
                        ret[n++] = '-';
                sep = false;
                ret[n++] = (char) (*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        }
        ret[n] = '\0';
        return n > 0;
}

void sdp_env_slug(const char *display, char ret[static SDP_ENV_ID_MAX]) {
        size_t n = 0;

        for (const char *p = display ?: ""; *p && n < 48; p++) {
                char c = *p >= 'A' && *p <= 'Z' ? (char) (*p - 'A' + 'a') : *p;

                if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
                        ret[n++] = c;
                else if (n > 0 && ret[n - 1] != '-')
                        ret[n++] = '-';
        }
        while (n > 0 && ret[n - 1] == '-')
                n--;
        ret[n] = '\0';
        /* Never a starter's or a base environment's name, never "setup": a prefix keeps it apart. */
        if (n == 0 || !env_name_valid(ret) || strncmp(ret, "starter-", 8) == 0 || streq(ret, "python-base") ||
            streq(ret, "r-base")) {
                char t[SDP_ENV_ID_MAX];

                (void) snprintf(t, sizeof(t), "env-%s", n > 0 ? ret : "");
                n = strlen(t);
                while (n > 0 && t[n - 1] == '-')
                        t[--n] = '\0';
                strcpy(ret, t);
        }
}
