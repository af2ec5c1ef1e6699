/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Cleanup attributes, ownership-transfer helpers and small generic macros. */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(fn) __attribute__((__cleanup__(fn)))
#define _unused_ __attribute__((__unused__))
#define _printf_(a, b) __attribute__((__format__(printf, a, b)))
#define _warn_unused_result_ __attribute__((__warn_unused_result__))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

#define SR_DEFINE_FREE_FUNC(type, fn)                                   \
        static inline void fn##p(type *pp) {                            \
                if (*pp)                                                \
                        (void) fn(*pp);                                 \
                *pp = NULL;                                             \
        }

#define STEAL(x) ({ typeof(x) _stolen = (x); (x) = NULL; _stolen; })
#define STEAL_FD(fd) ({ int _stolen = (fd); (fd) = -EBADF; _stolen; })

static inline void freep(void *p) {
        free(*(void **) p);
        *(void **) p = NULL;
}
#define _cleanup_free_ _cleanup_(freep)

static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        *fd = safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void close_pairp(int (*p)[2]) {
        (*p)[0] = safe_close((*p)[0]);
        (*p)[1] = safe_close((*p)[1]);
}
#define _cleanup_close_pair_ _cleanup_(close_pairp)

/* Overwrite a secret before freeing it. */
static inline void erase_and_free(char *s) {
        if (!s)
                return;
        explicit_bzero(s, strlen(s));
        free(s);
}
static inline void erase_and_freep(char **p) {
        erase_and_free(*p);
        *p = NULL;
}
#define _cleanup_erase_ _cleanup_(erase_and_freep)

static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

#define streq(a, b) (strcmp((a), (b)) == 0)
#define strneq(a, b, n) (strncmp((a), (b), (n)) == 0)
#define isempty(s) (!(s) || (s)[0] == '\0')

#define USEC_PER_SEC  ((uint64_t) 1000000ULL)
#define USEC_PER_MSEC ((uint64_t) 1000ULL)
#define NSEC_PER_USEC ((uint64_t) 1000ULL)

#define MAX(a, b) ({ typeof(a) _a = (a); typeof(b) _b = (b); _a > _b ? _a : _b; })
#define MIN(a, b) ({ typeof(a) _a = (a); typeof(b) _b = (b); _a < _b ? _a : _b; })
