/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/util/siphash24.c: the SipHash-2-4 test vectors, the key layouts and the tweak. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/siphash24.h"

/*
 * SipHash-2-4 with the key 00 01 .. 0f of the message 00 01 .. (i-1), for i = 0..63: the test
 * vectors of the reference implementation (the 15-byte one is the paper's worked example in its
 * appendix A).
 */
static const uint64_t vectors[64] = {
        UINT64_C(0x726fdb47dd0e0e31), UINT64_C(0x74f839c593dc67fd), UINT64_C(0x0d6c8009d9a94f5a),
        UINT64_C(0x85676696d7fb7e2d), UINT64_C(0xcf2794e0277187b7), UINT64_C(0x18765564cd99a68d),
        UINT64_C(0xcbc9466e58fee3ce), UINT64_C(0xab0200f58b01d137), UINT64_C(0x93f5f5799a932462),
        UINT64_C(0x9e0082df0ba9e4b0), UINT64_C(0x7a5dbbc594ddb9f3), UINT64_C(0xf4b32f46226bada7),
        UINT64_C(0x751e8fbc860ee5fb), UINT64_C(0x14ea5627c0843d90), UINT64_C(0xf723ca908e7af2ee),
        UINT64_C(0xa129ca6149be45e5), UINT64_C(0x3f2acc7f57c29bdb), UINT64_C(0x699ae9f52cbe4794),
        UINT64_C(0x4bc1b3f0968dd39c), UINT64_C(0xbb6dc91da77961bd), UINT64_C(0xbed65cf21aa2ee98),
        UINT64_C(0xd0f2cbb02e3b67c7), UINT64_C(0x93536795e3a33e88), UINT64_C(0xa80c038ccd5ccec8),
        UINT64_C(0xb8ad50c6f649af94), UINT64_C(0xbce192de8a85b8ea), UINT64_C(0x17d835b85bbb15f3),
        UINT64_C(0x2f2e6163076bcfad), UINT64_C(0xde4daaaca71dc9a5), UINT64_C(0xa6a2506687956571),
        UINT64_C(0xad87a3535c49ef28), UINT64_C(0x32d892fad841c342), UINT64_C(0x7127512f72f27cce),
        UINT64_C(0xa7f32346f95978e3), UINT64_C(0x12e0b01abb051238), UINT64_C(0x15e034d40fa197ae),
        UINT64_C(0x314dffbe0815a3b4), UINT64_C(0x027990f029623981), UINT64_C(0xcadcd4e59ef40c4d),
        UINT64_C(0x9abfd8766a33735c), UINT64_C(0x0e3ea96b5304a7d0), UINT64_C(0xad0c42d6fc585992),
        UINT64_C(0x187306c89bc215a9), UINT64_C(0xd4a60abcf3792b95), UINT64_C(0xf935451de4f21df2),
        UINT64_C(0xa9538f0419755787), UINT64_C(0xdb9acddff56ca510), UINT64_C(0xd06c98cd5c0975eb),
        UINT64_C(0xe612a3cb9ecba951), UINT64_C(0xc766e62cfcadaf96), UINT64_C(0xee64435a9752fe72),
        UINT64_C(0xa192d576b245165a), UINT64_C(0x0a8787bf8ecb74b2), UINT64_C(0x81b3e73d20b49b6f),
        UINT64_C(0x7fa8220ba3b2ecea), UINT64_C(0x245731c13ca42499), UINT64_C(0xb78dbfaf3a8d83bd),
        UINT64_C(0xea1ad565322a1a0b), UINT64_C(0x60e61c23a3795013), UINT64_C(0x6606d7e446282b93),
        UINT64_C(0x6ca4ecb15c5f91e1), UINT64_C(0x9f626da15c9625f3), UINT64_C(0xe51b38608ef25f57),
        UINT64_C(0x958a324ceb064572),
};

static uint8_t key[16], msg[64];

static int setup(void **state) {
        for (unsigned i = 0; i < 64; i++) {
                if (i < 16)
                        key[i] = (uint8_t) i;
                msg[i] = (uint8_t) i;
        }
        return 0;
}

static void test_vectors(void **state) {
        for (size_t i = 0; i < 64; i++)
                assert_int_equal(siphash24(msg, i, key), vectors[i]);
}

static void test_paper_examples(void **state) {
        assert_int_equal(siphash24("", 0, key), UINT64_C(0x726fdb47dd0e0e31));
        assert_int_equal(siphash24(msg, 15, key), UINT64_C(0xa129ca6149be45e5));
}

/* The key as two words is the byte key's little-endian halves; tweak 0 is the plain function. */
static void test_word_key(void **state) {
        const uint64_t k[2] = { UINT64_C(0x0706050403020100), UINT64_C(0x0f0e0d0c0b0a0908) };

        for (size_t i = 0; i < 64; i++)
                assert_int_equal(siphash24_tweak(msg, i, k, 0), vectors[i]);
}

static void test_tweak(void **state) {
        const uint64_t k[2] = { UINT64_C(0x0706050403020100), UINT64_C(0x0f0e0d0c0b0a0908) };
        const uint64_t k_tweaked[2] = { k[0], k[1] ^ 1 };

        for (size_t i = 0; i < 64; i++) {
                assert_int_not_equal(siphash24_tweak(msg, i, k, 1), vectors[i]);
                assert_int_not_equal(siphash24_tweak(msg, i, k, 1), siphash24_tweak(msg, i, k, 2));
                /* Only v3 sees it: not the same as a changed key. */
                assert_int_not_equal(siphash24_tweak(msg, i, k, 1), siphash24_tweak(msg, i, k_tweaked, 0));
                assert_int_equal(siphash24_tweak(msg, i, k, 7), siphash24_tweak(msg, i, k, 7));
        }
}

/* The result depends on the bytes only, not on their alignment. */
static void test_unaligned(void **state) {
        uint8_t buf[80];

        for (size_t off = 1; off < 8; off++) {
                memcpy(buf + off, msg, sizeof(msg));
                for (size_t i = 0; i < 64; i++)
                        assert_int_equal(siphash24(buf + off, i, key), vectors[i]);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_vectors),
                cmocka_unit_test(test_paper_examples),
                cmocka_unit_test(test_word_key),
                cmocka_unit_test(test_tweak),
                cmocka_unit_test(test_unaligned),
        };

        return cmocka_run_group_tests(tests, setup, NULL);
}
