/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The preflight, `sandbox-runnerd --check`: what this host lacks for the daemon, item by item
 * (bwrap, user namespaces, the sandbox probe, the limit mechanism, credentials, the state
 * directory, egress), each ok, warn or fail with the reason and the fix, as text or JSON. It
 * starts nothing: no listener, no HTTP, no state change (the probes are those of start-up: a few
 * throwaway sandboxes and a throwaway scope). The readers of /proc and /sys take their root as a
 * parameter so that a test can point them at a fake tree.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

typedef struct Config Config;

typedef enum PreflightStatus {
        PREFLIGHT_OK,
        PREFLIGHT_WARN,
        PREFLIGHT_FAIL,
        _PREFLIGHT_STATUS_MAX,
        _PREFLIGHT_STATUS_INVALID = -EINVAL,
} PreflightStatus;

/* "ok", "warn", "fail"; NULL for anything else. */
const char *preflight_status_to_string(PreflightStatus s);

/* The items, in the order they are checked and printed. */
#define PREFLIGHT_IDS "bwrap", "userns", "sandbox", "limits", "credentials", "state", "egress", "dialects"
#define PREFLIGHT_ITEMS_MAX 8

typedef struct PreflightItem {
        const char *id;                 /* static: one of PREFLIGHT_IDS */
        PreflightStatus status;
        char *summary;                  /* what was found, a short phrase */
        char *reason;                   /* why (a sentence), or NULL */
        char *fix;                      /* what to do (a sentence), for warn and fail; or NULL */
} PreflightItem;

typedef struct PreflightReport {
        PreflightItem items[PREFLIGHT_ITEMS_MAX];
        size_t n;
} PreflightReport;

/* Where the checks look: the host's, or a test's fake tree. */
typedef struct PreflightPaths {
        const char *proc;               /* "/proc" */
        const char *sys;                /* "/sys" (securityfs under kernel/security) */
        const char *root;               /* prefix of /etc and /usr paths (polkit rules, credstore); "" */
} PreflightPaths;

#define PREFLIGHT_PATHS_HOST ((const PreflightPaths) { .proc = "/proc", .sys = "/sys", .root = "" })

/* The name of the polkit rule (polkit/meson.build) and of the AppArmor profile for bwrap. */
#define PREFLIGHT_POLKIT_RULE "50-sandbox-runner.rules"
#define PREFLIGHT_APPARMOR_PROFILE "sandbox-runner-bwrap"

/* The state directory's free space below which the state item warns. */
#define PREFLIGHT_STATE_FREE_MIN (UINT64_C(1) << 30)

void preflight_item_done(PreflightItem *it);
void preflight_report_done(PreflightReport *r);

/*
 * preflight_item_set() - (re)fill @it: @id (static), @status, and copies of @summary, @reason and
 * @fix (the last two may be NULL). Return: 0 or -ENOMEM.
 */
int preflight_item_set(PreflightItem *it, const char *id, PreflightStatus status, const char *summary,
                       const char *reason, const char *fix);

/* preflight_report_ok() - no item failed (warnings do not count). */
bool preflight_report_ok(const PreflightReport *r);

/*
 * preflight_report_json() - {"checks": [{"id", "status", "summary", "reason"?, "fix"?}...],
 * "ok": bool}. Return: 0 or -ENOMEM.
 */
int preflight_report_json(const PreflightReport *r, json_object **ret);

/*
 * preflight_report_format() - one line an item: the status and the id in columns, the summary,
 * then ". " and the reason, then " Fix: " and the fix (warn and fail only).
 * Return: 0, or -EIO when @f could not be written.
 */
int preflight_report_format(const PreflightReport *r, FILE *f);

/*
 * preflight_read_sysctl() - the integer in @proc/sys/@name ("user/max_user_namespaces").
 * Return: 0; -ENOENT when the file does not exist (the kernel lacks the knob), -EBADMSG when it
 * does not hold one integer, other -errno of reading it.
 */
int preflight_read_sysctl(const char *proc, const char *name, long long *ret);

/*
 * preflight_apparmor_profile() - whether an AppArmor profile that applies to @bwrap is loaded:
 * in @sys/kernel/security/apparmor/profiles, one named @bwrap (a profile attached to the path) or,
 * for BWRAP_DEFAULT only, "bwrap" (Ubuntu's) or PREFLIGHT_APPARMOR_PROFILE (both attach there).
 * Return: 0 with *@ret_name (a new string: the name, quoted), -ENOTUNIQ with *@ret_name listing
 * them when more than one is loaded (conflicting attachments: the kernel applies none), -ENOENT
 * when none is loaded, -ENODEV when the list does not exist (no securityfs), other -errno when it
 * cannot be read.
 */
int preflight_apparmor_profile(const char *sys, const char *bwrap, char **ret_name);

/*
 * preflight_check_userns() - the item "userns": @proc's user.max_user_namespaces (> 0),
 * kernel.unprivileged_userns_clone where it exists (1) and kernel.apparmor_restrict_unprivileged_userns
 * where it exists (1 = restricted: then a profile for @bwrap must be loaded, else a warning).
 * Return: 0 or -ENOMEM.
 */
int preflight_check_userns(const PreflightPaths *p, const char *bwrap, PreflightItem *ret);

/*
 * preflight_find_polkit_rule() - PREFLIGHT_POLKIT_RULE in a directory polkitd reads
 * (@root/etc/polkit-1/rules.d, then @root/usr/share/polkit-1/rules.d).
 * Return: 0 with *@ret_path (a new string), -ENOENT when in neither, -ENOMEM.
 */
int preflight_find_polkit_rule(const char *root, char **ret_path);

/*
 * preflight_check_secret_file() - what the daemon requires of a secret file at @path: a regular
 * file (not a symlink: the daemon opens it with O_NOFOLLOW), not accessible to every user (mode &
 * 0007), not empty nor shorter than AUTH_SECRET_MIN bytes and, with @check_access, readable by
 * this process. Return: 0, or -errno (-ENOENT, -ELOOP, -EBADF not a regular file, -EPERM
 * world-accessible, -ENODATA empty or too short, -EACCES) with *@ret_problem, a sentence.
 */
int preflight_check_secret_file(const char *path, bool check_access, char **ret_problem);

/*
 * preflight_check_dialects() - the item "dialects", only when a listen address of @listen (Listen=,
 * "[DIALECT=]ADDRESS") or of @sockets (preflight_query_sockets()'s "DIALECT=ADDRESS (UNIT)")
 * names "sciencediscovery=": a warning that those listeners authenticate as that protocol does
 * (the bearer token, and a signature over the timestamp and the body only, keyed with that token:
 * method, path and query unsigned, no nonce), next to what our own API's v1 signature covers. Pure.
 * Return: 1 with *@ret filled, 0 when no listener speaks that dialect (*@ret untouched), -ENOMEM.
 */
int preflight_check_dialects(char *const *listen, char *const *sockets, PreflightItem *ret);

/*
 * preflight_query_sockets() - the listeners systemd passes to @service under socket activation:
 * for every socket unit in its TriggeredBy=, "DIALECT=ADDRESS (UNIT)" per Listen= address, the
 * dialect from its FileDescriptorName=. Asks the system manager over D-Bus; when it cannot (no
 * systemd, no bus, the service not loaded), *@ret is NULL and *@ret_reason says why.
 * Return: 0, or -ENOMEM.
 */
int preflight_query_sockets(const char *service, char ***ret, char **ret_reason);

/*
 * preflight_run() - every check for @c, in order, into @ret; @sockets: the socket units' listeners
 * (preflight_query_sockets(), or NULL) (filled also on failure: *@ret is
 * to be released with preflight_report_done()). Return: 0 or -ENOMEM.
 */
int preflight_run(const Config *c, const PreflightPaths *p, char *const *sockets, PreflightReport *ret);
