/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* NULL-terminated string arrays. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/strv.h"

size_t strv_length(char *const *l) {
        size_t n = 0;

        if (!l)
                return 0;
        while (l[n])
                n++;
        return n;
}

char **strv_free(char **l) {
        if (!l)
                return NULL;
        for (char **p = l; *p; p++)
                free(*p);
        free(l);
        return NULL;
}

int strv_consume(char ***l, char *value) {
        size_t n = strv_length(*l);
        char **t;

        if (!value)
                return -ENOMEM;
        t = realloc(*l, sizeof(char *) * (n + 2));
        if (!t) {
                free(value);
                return -ENOMEM;
        }
        t[n] = value;
        t[n + 1] = NULL;
        *l = t;
        return 0;
}

int strv_extend(char ***l, const char *value) {
        return strv_consume(l, strdup(value));
}

bool strv_contains(char *const *l, const char *s) {
        for (char *const *p = l; p && *p; p++)
                if (strcmp(*p, s) == 0)
                        return true;
        return false;
}
