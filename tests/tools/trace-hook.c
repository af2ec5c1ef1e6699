/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * trace-hook.so: for a build made with -finstrument-functions (tests/tools/trace-execution.sh),
 * every function entry is written as "<callee offset> <call site offset>\n", both relative to the
 * load address of the executable, to the file named by $SR_TRACE_FILE (O_APPEND, one write() an
 * entry, so that the threads' entries do not tear). LD_PRELOADed; nothing of it is instrumented.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINSTR __attribute__((no_instrument_function))

static int trace_fd = -1;
static uintptr_t base;

NOINSTR __attribute__((constructor)) static void trace_init(void) {
        const char *p = getenv("SR_TRACE_FILE");
        unsigned long start;
        FILE *f;

        char exe[4096];
        ssize_t n;

        if (!p)
                return;
        /* only the daemon: its keepers and sandboxes must not inherit the hook */
        unsetenv("LD_PRELOAD");
        n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0)
                return;
        exe[n] = 0;
        if (!strstr(exe, "sandbox-runnerd"))
                return;
        /* the executable is mapped first: its first line in maps is its base (offset 0) */
        f = fopen("/proc/self/maps", "re");
        if (!f)
                return;
        if (fscanf(f, "%lx-", &start) == 1)
                base = start;
        fclose(f);
        if (base)
                trace_fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

NOINSTR void __cyg_profile_func_enter(void *fn, void *site);
NOINSTR void __cyg_profile_func_enter(void *fn, void *site) {
        char buf[64];
        int n;

        if (trace_fd < 0)
                return;
        n = snprintf(buf, sizeof(buf), "%lx %lx\n", (unsigned long) ((uintptr_t) fn - base),
                     (unsigned long) ((uintptr_t) site - base));
        (void) !write(trace_fd, buf, (size_t) n);
}

NOINSTR void __cyg_profile_func_exit(void *fn, void *site);
NOINSTR void __cyg_profile_func_exit(void *fn, void *site) {
}
