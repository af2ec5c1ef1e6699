/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Calls to systemd's manager object (org.freedesktop.systemd1.Manager on the bus's
 * /org/freedesktop/systemd1), for the modules that drive units: the sandbox's scopes and the
 * egress gateway's socket units. Owns nothing but the name of that object; calls only libsystemd.
 */
#pragma once

#include <systemd/sd-bus.h>

#define SYSTEMD_BUS_SERVICE   "org.freedesktop.systemd1"
#define SYSTEMD_BUS_PATH      "/org/freedesktop/systemd1"
#define SYSTEMD_BUS_INTERFACE "org.freedesktop.systemd1.Manager"

/* bus_message_new_manager_call() - a new call of @member of systemd's manager. Return: 0 or -errno. */
int bus_message_new_manager_call(sd_bus *bus, sd_bus_message **ret, const char *member);

/*
 * bus_call_manager_async() - sd_bus_call_method_async() of @member of systemd's manager with
 * the arguments @types, …. Return: 0 or -errno, as sd_bus_call_method_async().
 */
int bus_call_manager_async(sd_bus *bus, sd_bus_slot **slot, const char *member,
                           sd_bus_message_handler_t callback, void *userdata, const char *types, ...);

