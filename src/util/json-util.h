/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* json-c with the tree's cleanup attribute: _cleanup_(json_object_putp) json_object *o = NULL. */
#pragma once

#include <json-c/json.h>

#include "util/macro.h"

SR_DEFINE_FREE_FUNC(json_object *, json_object_put);
