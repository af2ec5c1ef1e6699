/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * CAS digests: SHA-256 of an object's bytes, their "sha256:<hex>" spelling and the object path
 * they name below objects/, and DigestSet, the keyed open-addressing set of digests used for
 * pending objects and gc/fsck marking. Pure: no I/O; calls only libc and nettle.
 */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/sha2.h>

#include "util/macro.h"
#include "util/string-util.h"
#include "workspace/cas/cas-internal.h"

int cas_unhex_lower(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

/* Exactly 64 lowercase hex digits at @s (not necessarily NUL-terminated). */
int digest_from_hex(const char *s, Digest *ret) {
        Digest d = {};

        for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++) {
                int hi = cas_unhex_lower(s[2 * i]), lo = hi < 0 ? -1 : cas_unhex_lower(s[2 * i + 1]);

                if (lo < 0)
                        return -EINVAL;
                d.b[i] = (uint8_t) (hi << 4 | lo);
        }
        *ret = d;
        return 0;
}

int digest_parse(const char *s, Digest *ret) {
        if (!s || strncmp(s, DIGEST_PREFIX, strlen(DIGEST_PREFIX)) != 0)
                return -EINVAL;
        s += strlen(DIGEST_PREFIX);
        if (strnlen(s, DIGEST_HEX_LEN + 1) != DIGEST_HEX_LEN)
                return -EINVAL;
        return digest_from_hex(s, ret);
}

void digest_format(const Digest *d, char out[static 72]) {
        memcpy(out, DIGEST_PREFIX, strlen(DIGEST_PREFIX));
        hex_encode(d->b, sizeof(d->b), out + strlen(DIGEST_PREFIX));
}

/* "xx/yyyy…": the object's path below objects/. */
void digest_relpath(const Digest *d, char out[static 66]) {
        char hex[DIGEST_HEX_LEN + 1];

        hex_encode(d->b, sizeof(d->b), hex);
        out[0] = hex[0];
        out[1] = hex[1];
        out[2] = '/';
        memcpy(out + 3, hex + 2, DIGEST_HEX_LEN - 2 + 1);
}

void digest_of(const void *data, size_t size, Digest *ret) {
        struct sha256_ctx h;

        sha256_init(&h);
        sha256_update(&h, size, data);
        sha256_digest(&h, sizeof(ret->b), ret->b);
}

bool digest_eq(const Digest *a, const Digest *b) {
        return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

/* ---------------------------------------------------------------------------------------------
 * Digest sets (open addressing), for pending objects and gc/fsck marking. */

static size_t dset_slot(const DigestSet *s, const Digest *d) {
        uint64_t x;

        memcpy(&x, d->b, sizeof(x));
        x ^= s->seed;
        x ^= x >> 33;
        x *= UINT64_C(0xff51afd7ed558ccd);
        x ^= x >> 33;
        x *= UINT64_C(0xc4ceb9fe1a85ec53);
        x ^= x >> 33;
        return (size_t) x & (s->cap - 1);
}

bool cas_dset_contains(const DigestSet *s, const Digest *d) {
        if (s->n == 0)
                return false;
        for (size_t i = dset_slot(s, d);; i = (i + 1) & (s->cap - 1)) {
                if (!s->used[i])
                        return false;
                if (digest_eq(&s->keys[i], d))
                        return true;
        }
}

static void dset_insert_new(DigestSet *s, const Digest *d) {
        size_t i = dset_slot(s, d);

        while (s->used[i])
                i = (i + 1) & (s->cap - 1);
        s->keys[i] = *d;
        s->used[i] = 1;
        s->n++;
}

/* Return: 1 added, 0 already present, -ENOMEM. */
int cas_dset_add(DigestSet *s, const Digest *d) {
        if (cas_dset_contains(s, d))
                return 0;
        if ((s->n + 1) * 2 > s->cap) {
                DigestSet g = { .seed = s->seed, .cap = s->cap ? s->cap * 2 : 64 };

                g.keys = calloc(g.cap, sizeof(Digest));
                g.used = calloc(g.cap, 1);
                if (!g.keys || !g.used) {
                        free(g.keys);
                        free(g.used);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < s->cap; i++)
                        if (s->used[i])
                                dset_insert_new(&g, &s->keys[i]);
                free(s->keys);
                free(s->used);
                *s = g;
        }
        dset_insert_new(s, d);
        return 1;
}

void cas_dset_clear(DigestSet *s) {
        if (s->used)
                memset(s->used, 0, s->cap);
        s->n = 0;
}

void cas_dset_done(DigestSet *s) {
        s->keys = mfree(s->keys);
        s->used = mfree(s->used);
        s->n = s->cap = 0;
}
