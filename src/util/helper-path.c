/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Where the daemon's helper binaries are: see helper-path.h. */

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build-config.h"
#include "util/helper-path.h"

char *find_helper(const char *subdir, const char *name) {
        char self[PATH_MAX], *slash, *p = NULL;
        ssize_t n;

        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
                self[n] = '\0';
                slash = strrchr(self, '/');
                if (slash) {
                        *slash = '\0';
                        if (asprintf(&p, "%s/%s", self, name) >= 0 && access(p, X_OK) == 0)
                                return p;
                        free(p);
                        p = NULL;
                        if (asprintf(&p, "%s/%s/%s", self, subdir, name) >= 0 && access(p, X_OK) == 0)
                                return p;
                        free(p);
                        p = NULL;
                }
        }
        if (asprintf(&p, "%s/%s", LIBEXECDIR, name) >= 0 && access(p, X_OK) == 0)
                return p;
        free(p);
        return NULL;
}
