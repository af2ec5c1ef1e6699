/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Calls to systemd's manager object (org.freedesktop.systemd1.Manager on the bus's
 * /org/freedesktop/systemd1), for the modules that drive units: the sandbox's scopes and the
 * egress gateway's socket units. Owns nothing but the name of that object; calls only libsystemd.
 */

#include <stdarg.h>

#include "util/bus-util.h"
#include "util/macro.h"

int bus_message_new_manager_call(sd_bus *bus, sd_bus_message **ret, const char *member) {
        return sd_bus_message_new_method_call(bus, ret, SYSTEMD_BUS_SERVICE, SYSTEMD_BUS_PATH,
                                              SYSTEMD_BUS_INTERFACE, member);
}

int bus_call_manager_async(sd_bus *bus, sd_bus_slot **slot, const char *member,
                           sd_bus_message_handler_t callback, void *userdata, const char *types, ...) {
        sd_bus_message *m = NULL;
        va_list ap;
        int r;

        r = bus_message_new_manager_call(bus, &m, member);
        if (r < 0)
                return r;
        if (!isempty(types)) {
                va_start(ap, types);
                r = sd_bus_message_appendv(m, types, ap);
                va_end(ap);
        }
        if (r >= 0)
                r = sd_bus_call_async(bus, slot, m, callback, userdata, 0);
        sd_bus_message_unref(m);
        return r;
}
