/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SipHash-2-4, the keyed hash of the daemon's in-memory hash tables (util/hashmap.h): names and
 * ids there are chosen by clients or sandboxes, so the tables are keyed with a random key against
 * engineered collisions. Owns nothing; calls nothing but libc.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/*
 * siphash24_tweak() - SipHash-2-4 of @data under the key (@key[0], @key[1]) (k0 and k1 of the
 * paper: the key's little-endian halves). @tweak is xored into v3's initial value only, so that one
 * key serves several tables with unrelated hashes; 0 gives the standard function.
 */
uint64_t siphash24_tweak(const void *data, size_t len, const uint64_t key[2], uint64_t tweak);

/* siphash24() - SipHash-2-4 of @data under the 16-byte key @key, as the paper defines it. */
uint64_t siphash24(const void *data, size_t len, const uint8_t key[16]);
