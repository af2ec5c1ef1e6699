/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * --check under socket activation: the listeners systemd would pass to sandbox-runner.service,
 * asked of the system manager over D-Bus. Every socket unit that triggers the service (its
 * TriggeredBy=: sandbox-runner.socket, and any socket with Service=sandbox-runner.service, such
 * as sandbox-runner-sciencediscovery.socket) gives its FileDescriptorName=, which chooses the
 * dialect (util/dialect.h), and its Listen= addresses. Only reads properties: loads no unit
 * that is not loaded already, starts nothing.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "daemon/preflight.h"
#include "util/bus-util.h"
#include "util/dialect.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strv.h"

static int unit_path(sd_bus *bus, const char *unit, char **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *path;
        int r;

        r = sd_bus_call_method(bus, SYSTEMD_BUS_SERVICE, SYSTEMD_BUS_PATH, SYSTEMD_BUS_INTERFACE, "GetUnit",
                               &error, &reply, "s", unit);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "o", &path);
        if (r < 0)
                return r;
        *ret = strdup(path);
        return *ret ? 0 : -ENOMEM;
}

/* The entries of one socket unit: "NAME=ADDRESS (UNIT)" for each of its Listen= addresses. */
static int socket_entries(sd_bus *bus, const char *unit, char ***list) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *path = NULL, *fd_name = NULL;
        const char *type, *address;
        int r;

        r = unit_path(bus, unit, &path);
        if (r < 0)
                return r;
        r = sd_bus_get_property_string(bus, SYSTEMD_BUS_SERVICE, path, "org.freedesktop.systemd1.Socket",
                                       "FileDescriptorName", &error, &fd_name);
        if (r < 0)
                return r;
        r = sd_bus_get_property(bus, SYSTEMD_BUS_SERVICE, path, "org.freedesktop.systemd1.Socket", "Listen",
                                &error, &reply, "a(ss)");
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "(ss)");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(reply, "(ss)", &type, &address)) > 0) {
                char *entry;

                if (asprintf(&entry, "%s=%s (%s)", http_dialect_to_string(http_dialect_from_fd_name(fd_name)),
                             address, unit) < 0)
                        return -ENOMEM;
                r = strv_consume(list, entry);
                if (r < 0)
                        return r;
        }
        return r;
}

int preflight_query_sockets(const char *service, char ***ret, char **ret_reason) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_strv_free_ char **triggered_by = NULL, **list = NULL;
        _cleanup_free_ char *path = NULL;
        int r;

        *ret = NULL;
        *ret_reason = NULL;
        r = sd_bus_open_system(&bus);
        if (r >= 0)
                r = unit_path(bus, service, &path);
        if (r >= 0)
                r = sd_bus_get_property_strv(bus, SYSTEMD_BUS_SERVICE, path, "org.freedesktop.systemd1.Unit",
                                             "TriggeredBy", &error, &triggered_by);
        if (r < 0)
                return asprintf(ret_reason, "systemd's manager could not tell the sockets of %s: %s", service,
                                strerror(-r)) < 0 ? -ENOMEM : 0;
        STRV_FOREACH(u, triggered_by) {
                size_t n = strlen(*u);

                if (n < 7 || strcmp(*u + n - 7, ".socket") != 0)
                        continue;
                r = socket_entries(bus, *u, &list);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        log_debug_errno(r, "Failed to read the listeners of %s: %m", *u);
        }
        *ret = list;
        list = NULL;
        return 0;
}
