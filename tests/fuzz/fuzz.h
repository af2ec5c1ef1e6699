/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers shared by the libFuzzer targets (tests/fuzz/fuzz-*.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A broken invariant: abort() so that libFuzzer keeps the input as a crash. */
#define FUZZ_CHECK(expr)                                                                        \
        do {                                                                                    \
                if (!(expr)) {                                                                  \
                        fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #expr); \
                        abort();                                                                \
                }                                                                               \
        } while (0)

/* A NUL-terminated copy of @size bytes (bytes after an embedded NUL are then invisible). */
static inline char *fuzz_strndup(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);

        if (!s)
                abort();
        memcpy(s, data, size);
        s[size] = '\0';
        return s;
}

/*
 * fuzz_split() - split @data at @sep into at most @max NUL-terminated fields, all pointing into one
 * allocation (*ret_buf, free it); the last field takes the rest, separators included. Unused
 * fields are "". Return: the number of fields found (>= 1).
 */
static inline size_t fuzz_split(const uint8_t *data, size_t size, char sep, char **fields, size_t max,
                                char **ret_buf) {
        char *buf = fuzz_strndup(data, size), *p = buf;
        size_t n = 0;

        for (; n + 1 < max; n++) {
                char *e = memchr(p, sep, (size_t) (buf + size - p));
                if (!e)
                        break;
                fields[n] = p;
                *e = '\0';
                p = e + 1;
        }
        fields[n++] = p;
        for (size_t i = n; i < max; i++)
                fields[i] = buf + size;         /* the final NUL: "" */
        *ret_buf = buf;
        return n;
}
