/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* json-c with the tree's cleanup attribute: _cleanup_(json_object_putp) json_object *o = NULL. */
#pragma once

#include <json-c/json.h>
#include <stdint.h>

#include "util/macro.h"

SR_DEFINE_FREE_FUNC(json_object *, json_object_put);

/* json_new_u64() - an unsigned count as a JSON number; past INT64_MAX (never, in practice) it is
 * clamped to INT64_MAX, as API.md's integers are signed 64-bit. */
static inline json_object *json_new_u64(uint64_t v) {
        return json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t) v);
}
