/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SipHash-2-4 (Jean-Philippe Aumasson, Daniel J. Bernstein: "SipHash: a fast short-input PRF",
 * INDOCRYPT 2012, https://131002.net/siphash/siphash.pdf), written from the paper's description of
 * the reference algorithm: 2 compression rounds per 8-byte message word, 4 finalisation rounds.
 * tests/unit/test-siphash.c checks it against the 64 test vectors of the reference implementation
 * (key 00..0f; "" → 0x726fdb47dd0e0e31, bytes 00..0e → 0xa129ca6149be45e5 as in the paper's
 * appendix). Owns nothing; calls nothing but libc.
 */

#include <endian.h>
#include <string.h>

#include "util/siphash24.h"

static inline uint64_t rotl64(uint64_t x, unsigned b) {
        return (x << b) | (x >> (64 - b));
}

static inline uint64_t load_le64(const uint8_t *p) {
        uint64_t v;

        memcpy(&v, p, sizeof(v));
        return le64toh(v);
}

/* One SipRound (the paper's Figure 2): two ARX half-rounds over the four state words. */
#define SIPROUND(v0, v1, v2, v3)                                                \
        do {                                                                    \
                v0 += v1; v1 = rotl64(v1, 13); v1 ^= v0; v0 = rotl64(v0, 32);   \
                v2 += v3; v3 = rotl64(v3, 16); v3 ^= v2;                        \
                v0 += v3; v3 = rotl64(v3, 21); v3 ^= v0;                        \
                v2 += v1; v1 = rotl64(v1, 17); v1 ^= v2; v2 = rotl64(v2, 32);   \
        } while (0)

uint64_t siphash24_tweak(const void *data, size_t len, const uint64_t key[2], uint64_t tweak) {
        const uint8_t *p = data;
        /* Initialisation: the key xored into the constants "somepseudorandomlygeneratedbytes". */
        uint64_t v0 = UINT64_C(0x736f6d6570736575) ^ key[0];
        uint64_t v1 = UINT64_C(0x646f72616e646f6d) ^ key[1];
        uint64_t v2 = UINT64_C(0x6c7967656e657261) ^ key[0];
        uint64_t v3 = UINT64_C(0x7465646279746573) ^ key[1] ^ tweak;
        /* The last word: the remaining bytes, and the length mod 256 in the top byte. */
        uint64_t last = (uint64_t) len << 56, m;
        size_t i;

        /* Compression: each full little-endian word goes through 2 SipRounds. */
        for (i = 0; i + 8 <= len; i += 8) {
                m = load_le64(p + i);
                v3 ^= m;
                SIPROUND(v0, v1, v2, v3);
                SIPROUND(v0, v1, v2, v3);
                v0 ^= m;
        }
        for (size_t j = 0; i + j < len; j++)
                last |= (uint64_t) p[i + j] << (8 * j);
        v3 ^= last;
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        v0 ^= last;

        /* Finalisation: 4 SipRounds after xoring 0xff into v2. */
        v2 ^= 0xff;
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t siphash24(const void *data, size_t len, const uint8_t key[16]) {
        const uint64_t k[2] = { load_le64(key), load_le64(key + 8) };

        return siphash24_tweak(data, len, k, 0);
}
