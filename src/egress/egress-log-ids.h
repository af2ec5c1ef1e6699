/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* MESSAGE_IDs of the egress gateway, until src/util/log-ids.h carries them (each has a catalog entry). */
#pragma once

#include "util/log-ids.h"

#ifndef SR_MESSAGE_EGRESS_ALLOWED
#define SR_MESSAGE_EGRESS_ALLOWED        "9394c9ce8cf744608d25f91394ffee57"
#endif
#ifndef SR_MESSAGE_EGRESS_DENIED
#define SR_MESSAGE_EGRESS_DENIED         "9b6badc02f3e4187a43154179427c795"
#endif
#ifndef SR_MESSAGE_EGRESS_FAILED
#define SR_MESSAGE_EGRESS_FAILED         "8573777582924a828e78429c03cdc2b4"
#endif
#ifndef SR_MESSAGE_EGRESS_POLICY_INVALID
#define SR_MESSAGE_EGRESS_POLICY_INVALID "9b444a71df4c4fc791d01f051ba3383d"
#endif
#ifndef SR_MESSAGE_EGRESS_STARTED
#define SR_MESSAGE_EGRESS_STARTED        "cf725a2c399b4f63a2a73ae8e917e5a5"
#endif
#ifndef SR_MESSAGE_EGRESS_STOPPED
#define SR_MESSAGE_EGRESS_STOPPED        "6158ec6d15184288be0cc7ec83e1613d"
#endif
