/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Dropping every capability the daemon was started with. */

#include <errno.h>
#include <linux/capability.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include "sandbox/caps.h"
#include "util/macro.h"

SR_DEFINE_FREE_FUNC(cap_t, cap_free);

int caps_drop_bounding(void) {
        cap_value_t last = (cap_value_t) cap_max_bits() - 1;

        for (cap_value_t c = 0; c <= last; c++) {
                int v = cap_get_bound(c);
                if (v <= 0)
                        continue;
                if (cap_drop_bound(c) < 0 && errno != EPERM && errno != EINVAL)
                        return negative_errno();
        }
        return 0;
}

int caps_drop_all(void) {
        _cleanup_(cap_freep) cap_t empty = NULL;
        int r;

        /* The bounding set first: dropping from it needs CAP_SETPCAP, which goes next. */
        r = caps_drop_bounding();
        if (r < 0)
                return r;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return negative_errno();

        empty = cap_init();
        if (!empty)
                return negative_errno();
        if (cap_set_proc(empty) < 0)
                return negative_errno();
        return 0;
}
