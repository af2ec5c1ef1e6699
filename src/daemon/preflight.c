/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The preflight, `sandbox-runnerd --check`: each item's check, and the report as text or JSON. */

#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "build-config.h"
#include "config/config.h"
#include "core/manager.h"
#include "daemon/preflight.h"
#include "daemon/privileges.h"
#include "http/auth.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sandbox/scope.h"
#include "util/dialect.h"
#include "util/helper-path.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/string-util.h"

static const char *const status_names[_PREFLIGHT_STATUS_MAX] = {
        [PREFLIGHT_OK] = "ok",
        [PREFLIGHT_WARN] = "warn",
        [PREFLIGHT_FAIL] = "fail",
};

const char *preflight_status_to_string(PreflightStatus s) {
        return s >= 0 && s < _PREFLIGHT_STATUS_MAX ? status_names[s] : NULL;
}

void preflight_item_done(PreflightItem *it) {
        free(it->summary);
        free(it->reason);
        free(it->fix);
        *it = (PreflightItem) {};
}

void preflight_report_done(PreflightReport *r) {
        for (size_t i = 0; i < r->n; i++)
                preflight_item_done(&r->items[i]);
        r->n = 0;
}

int preflight_item_set(PreflightItem *it, const char *id, PreflightStatus status, const char *summary,
                       const char *reason, const char *fix) {
        PreflightItem n = { .id = id, .status = status };

        n.summary = strdup(summary ?: "");
        n.reason = reason ? strdup(reason) : NULL;
        n.fix = fix ? strdup(fix) : NULL;
        if (!n.summary || (reason && !n.reason) || (fix && !n.fix)) {
                preflight_item_done(&n);
                return -ENOMEM;
        }
        preflight_item_done(it);
        *it = n;
        return 0;
}

bool preflight_report_ok(const PreflightReport *r) {
        for (size_t i = 0; i < r->n; i++)
                if (r->items[i].status == PREFLIGHT_FAIL)
                        return false;
        return true;
}

int preflight_report_json(const PreflightReport *r, json_object **ret) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *checks = json_object_new_array();

        if (!o || !checks)
                return -ENOMEM;
        for (size_t i = 0; i < r->n; i++) {
                const PreflightItem *it = &r->items[i];
                json_object *c = json_object_new_object();

                if (!c || json_object_array_add(checks, c) < 0) {
                        json_object_put(c);
                        return -ENOMEM;
                }
                if (json_object_object_add(c, "id", json_object_new_string(it->id)) < 0 ||
                    json_object_object_add(c, "status",
                                           json_object_new_string(preflight_status_to_string(it->status))) < 0 ||
                    json_object_object_add(c, "summary", json_object_new_string(it->summary)) < 0 ||
                    (it->reason && json_object_object_add(c, "reason", json_object_new_string(it->reason)) < 0) ||
                    (it->fix && it->status != PREFLIGHT_OK &&
                     json_object_object_add(c, "fix", json_object_new_string(it->fix)) < 0))
                        return -ENOMEM;
        }
        if (json_object_object_add(o, "checks", STEAL(checks)) < 0 ||
            json_object_object_add(o, "ok", json_object_new_boolean(preflight_report_ok(r))) < 0)
                return -ENOMEM;
        *ret = STEAL(o);
        return 0;
}

int preflight_report_format(const PreflightReport *r, FILE *f) {
        for (size_t i = 0; i < r->n; i++) {
                const PreflightItem *it = &r->items[i];
                bool fix = it->fix && it->status != PREFLIGHT_OK;

                fprintf(f, "%-4s  %-11s  %s%s%s%s%s\n", preflight_status_to_string(it->status), it->id, it->summary,
                        it->reason ? ". " : "", it->reason ?: "", fix ? " Fix: " : "", fix ? it->fix : "");
        }
        return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}

/* ---- readers of /proc and /sys ----------------------------------------------------------------- */

int preflight_read_sysctl(const char *proc, const char *name, long long *ret) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        char *end;
        long long v;
        size_t n;
        int r;

        if (asprintf(&path, "%s/sys/%s", proc, name) < 0)
                return -ENOMEM;
        r = read_file_limited(AT_FDCWD, path, O_NOCTTY, 64, READ_FILE_UP_TO_MAX, &text, &n);
        if (r < 0)
                return r;
        errno = 0;
        v = strtoll(text, &end, 10);
        if (errno != 0 || end == text || strspn(end, " \t\n") != strlen(end))
                return -EBADMSG;
        *ret = v;
        return 0;
}

int preflight_apparmor_profile(const char *sys, const char *bwrap, char **ret_name) {
        _cleanup_free_ char *path = NULL, *text = NULL, *names = NULL;
        unsigned found = 0;
        size_t n;
        int r;

        if (asprintf(&path, "%s/kernel/security/apparmor/profiles", sys) < 0)
                return -ENOMEM;
        r = read_file_limited(AT_FDCWD, path, O_NOCTTY, 4 << 20, READ_FILE_UP_TO_MAX, &text, &n);
        if (r == -ENOENT)
                return -ENODEV;         /* no list at all: not "no such profile" */
        if (r < 0)
                return r;
        /* One "NAME (MODE)" a line; a profile attached to a path is named by it. Ubuntu's "bwrap" and
         * ours attach to the default path only. */
        for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *mode = strrchr(line, '(');

                if (mode && mode > line && mode[-1] == ' ')
                        mode[-1] = '\0';
                if (streq(line, bwrap) ||
                    (streq(bwrap, BWRAP_DEFAULT) && (streq(line, "bwrap") || streq(line, PREFLIGHT_APPARMOR_PROFILE)))) {
                        char *joined = NULL;

                        if (asprintf(&joined, "%s%s'%s'", names ?: "", names ? " and " : "", line) < 0)
                                return -ENOMEM;
                        free(names);
                        names = joined;
                        found++;
                }
        }
        if (found == 0)
                return -ENOENT;
        *ret_name = STEAL(names);
        return found == 1 ? 0 : -ENOTUNIQ;
}

/* kernel.apparmor_restrict_unprivileged_userns is 1: a profile for bwrap must let it through. */
static int userns_apparmor(const PreflightPaths *p, const char *bwrap, PreflightItem *ret) {
        _cleanup_free_ char *name = NULL, *reason = NULL, *summary = NULL;
        int r;

        r = preflight_apparmor_profile(p->sys, bwrap, &name);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOENT) {
                if (asprintf(&reason, "kernel.apparmor_restrict_unprivileged_userns is 1 and no AppArmor profile for "
                             "bwrap is loaded (none named '%s', 'bwrap' or '" PREFLIGHT_APPARMOR_PROFILE "'): an "
                             "unprivileged bwrap cannot create user namespaces.", bwrap) < 0)
                        return -ENOMEM;
                /* The shipped profile attaches to the default path only (units/apparmor). */
                return preflight_item_set(ret, "userns", PREFLIGHT_WARN, "restricted by AppArmor", reason,
                                          streq(bwrap, BWRAP_DEFAULT) ?
                                          "Install the AppArmor profile '" PREFLIGHT_APPARMOR_PROFILE "' (meson "
                                          "-Dapparmor=enabled puts it into " APPARMOR_DIR ") and load it: "
                                          "'apparmor_parser -r " APPARMOR_DIR "/" PREFLIGHT_APPARMOR_PROFILE "'; "
                                          "see docs/apparmor.md." :
                                          "Load an AppArmor profile for this bwrap: a copy of '"
                                          PREFLIGHT_APPARMOR_PROFILE "' (meson -Dapparmor=enabled), which "
                                          "attaches to " BWRAP_DEFAULT ", attached to [Execution] Bwrap= instead, "
                                          "then 'apparmor_parser -r' it; see docs/apparmor.md.");
        }
        if (r == -ENOTUNIQ) {
                if (asprintf(&reason, "kernel.apparmor_restrict_unprivileged_userns is 1 and the AppArmor profiles %s "
                             "all attach to %s: with conflicting attachments the kernel applies none of them, and "
                             "an unprivileged bwrap cannot create user namespaces.", name, bwrap) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "userns", PREFLIGHT_WARN, "conflicting AppArmor profiles", reason,
                                          "Keep one profile for bwrap: remove the others from /etc/apparmor.d and "
                                          "unload them ('apparmor_parser -R FILE'); see docs/apparmor.md.");
        }
        if (r < 0) {
                if (asprintf(&reason, "kernel.apparmor_restrict_unprivileged_userns is 1 and the loaded AppArmor "
                             "profiles cannot be read (%s/kernel/security/apparmor/profiles: %s).", p->sys,
                             r == -ENODEV ? "no such file; is securityfs mounted?" : strerror(-r)) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "userns", PREFLIGHT_WARN, "restricted by AppArmor", reason,
                                          "Run the check as root, or make sure the AppArmor profile '"
                                          PREFLIGHT_APPARMOR_PROFILE "' (see docs/apparmor.md) is loaded.");
        }
        if (asprintf(&summary, "allowed to bwrap by the AppArmor profile %s", name) < 0 ||
            asprintf(&reason, "kernel.apparmor_restrict_unprivileged_userns is 1; the profile %s lets bwrap "
                     "create user namespaces.", name) < 0)
                return -ENOMEM;
        return preflight_item_set(ret, "userns", PREFLIGHT_OK, summary, reason, NULL);
}

int preflight_check_userns(const PreflightPaths *p, const char *bwrap, PreflightItem *ret) {
        _cleanup_free_ char *reason = NULL;
        long long max, v;
        int r;

        r = preflight_read_sysctl(p->proc, "user/max_user_namespaces", &max);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOENT) {
                if (asprintf(&reason, "%s/sys/user/max_user_namespaces does not exist: this kernel has no user "
                             "namespaces.", p->proc) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "userns", PREFLIGHT_FAIL, "no user namespaces", reason,
                                          "Use a kernel built with CONFIG_USER_NS=y.");
        }
        if (r < 0) {
                if (asprintf(&reason, "%s/sys/user/max_user_namespaces cannot be read: %s.", p->proc, strerror(-r)) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "userns", PREFLIGHT_WARN, "unknown", reason,
                                          "Check that /proc is mounted and readable.");
        }
        if (max <= 0) {
                if (asprintf(&reason, "user.max_user_namespaces is %lld: no process may create a user namespace.",
                             max) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "userns", PREFLIGHT_FAIL, "user namespaces are disabled", reason,
                                          "Run 'sysctl -w user.max_user_namespaces=15000' and put "
                                          "'user.max_user_namespaces = 15000' in /etc/sysctl.d/50-sandbox-runner.conf.");
        }

        /* Debian's and some distributions' kernels; the knob is absent elsewhere. */
        r = preflight_read_sysctl(p->proc, "kernel/unprivileged_userns_clone", &v);
        if (r == -ENOMEM)
                return r;
        if (r >= 0 && v != 1) {
                if (asprintf(&reason, "kernel.unprivileged_userns_clone is %lld: only root may create user namespaces.",
                             v) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "userns", PREFLIGHT_FAIL, "unprivileged user namespaces are disabled",
                                          reason,
                                          "Run 'sysctl -w kernel.unprivileged_userns_clone=1' and put "
                                          "'kernel.unprivileged_userns_clone = 1' in /etc/sysctl.d/50-sandbox-runner.conf.");
        }

        /* Ubuntu >= 23.10. */
        r = preflight_read_sysctl(p->proc, "kernel/apparmor_restrict_unprivileged_userns", &v);
        if (r == -ENOMEM)
                return r;
        if (r >= 0 && v == 1)
                return userns_apparmor(p, bwrap, ret);

        if (asprintf(&reason, "user.max_user_namespaces is %lld.", max) < 0)
                return -ENOMEM;
        return preflight_item_set(ret, "userns", PREFLIGHT_OK, "unprivileged user namespaces are available", reason,
                                  NULL);
}

int preflight_find_polkit_rule(const char *root, char **ret_path) {
        static const char *const dirs[] = { "/etc/polkit-1/rules.d", "/usr/share/polkit-1/rules.d" };

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                _cleanup_free_ char *path = NULL;

                if (asprintf(&path, "%s%s/" PREFLIGHT_POLKIT_RULE, root, dirs[i]) < 0)
                        return -ENOMEM;
                if (access(path, F_OK) == 0) {
                        *ret_path = STEAL(path);
                        return 0;
                }
        }
        return -ENOENT;
}

int preflight_check_secret_file(const char *path, bool check_access, char **ret_problem) {
        struct stat st;

        *ret_problem = NULL;
        if (lstat(path, &st) < 0)
                return set_message(ret_problem, negative_errno(), "'%s' cannot be found: %m.", path);
        if (S_ISLNK(st.st_mode))
                return set_message(ret_problem, -ELOOP, "'%s' is a symbolic link, which the daemon does not follow.",
                                   path);
        if (!S_ISREG(st.st_mode))
                return set_message(ret_problem, -EBADF, "'%s' is not a regular file.", path);
        if (st.st_mode & 0007)
                return set_message(ret_problem, -EPERM, "'%s' has mode %04o: every user of this host may read it.",
                                   path, (unsigned) (st.st_mode & 07777));
        if (st.st_size == 0)
                return set_message(ret_problem, -ENODATA, "'%s' is empty.", path);
        if (st.st_size < AUTH_SECRET_MIN)
                return set_message(ret_problem, -ENODATA, "'%s' holds %lld bytes, fewer than the %u the daemon needs.",
                                   path, (long long) st.st_size, AUTH_SECRET_MIN);
        if (check_access && access(path, R_OK) < 0)
                return set_message(ret_problem, negative_errno(), "'%s' cannot be read by this user: %m.", path);
        return 0;
}

/* ---- the checks of the host ------------------------------------------------------------------- */

/* "user 'NAME'" (or "uid N") of this process, for the notes; a new string or NULL. */
static char *this_user(void) {
        struct passwd *pw = getpwuid(geteuid());
        char *s = NULL;

        if ((pw ? asprintf(&s, "user '%s'", pw->pw_name) : asprintf(&s, "uid %u", (unsigned) geteuid())) < 0)
                return NULL;
        return s;
}

static bool is_service_user(void) {
        struct passwd *pw = getpwuid(geteuid());

        return pw && streq(pw->pw_name, SERVICE_USER);
}

static int check_bwrap(const Config *c, PreflightItem *ret) {
        _cleanup_free_ char *version = NULL, *summary = NULL, *reason = NULL;

        if (access(c->bwrap, X_OK) < 0) {
                if (asprintf(&summary, "'%s' is missing or not executable", c->bwrap) < 0 ||
                    asprintf(&reason, "[Execution] Bwrap= names '%s', which cannot be run: %s.", c->bwrap,
                             strerror(errno)) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "bwrap", PREFLIGHT_FAIL, summary, reason,
                                          "Install bubblewrap (apt install bubblewrap) or set [Execution] Bwrap= to "
                                          "its path.");
        }
        version = sandbox_bwrap_version(c->bwrap);
        if (!version) {
                if (asprintf(&summary, "'%s' does not tell its version", c->bwrap) < 0 ||
                    asprintf(&reason, "'%s --version' printed nothing.", c->bwrap) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "bwrap", PREFLIGHT_WARN, summary, reason,
                                          "Make [Execution] Bwrap= name bubblewrap's bwrap.");
        }
        if (asprintf(&summary, "%s at %s", version, c->bwrap) < 0)
                return -ENOMEM;
        return preflight_item_set(ret, "bwrap", PREFLIGHT_OK, summary, NULL, NULL);
}

/* The probe of start-up, sandbox_probe(), and its keeper. */
static int check_sandbox(const Config *c, PreflightItem *ret) {
        _cleanup_(sandbox_probe_report_done) SandboxProbeReport rep = {};
        _cleanup_free_ char *keeper = NULL, *reason = NULL;
        const SandboxProbe *p = &rep.probe;
        int r;

        r = sandbox_probe(c->bwrap, &rep);
        if (r < 0)
                return r;
        if (!rep.usable) {
                if (asprintf(&reason, "%s.", rep.reason ?: "no sandbox could be built") < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "sandbox", PREFLIGHT_FAIL, "no sandbox can be built", reason,
                                          "Fix the items bwrap and userns first; in a container, let it create user, "
                                          "mount and pid namespaces.");
        }
        keeper = find_helper("keeper", "sandbox-runner-keeper");
        if (!keeper)
                return preflight_item_set(ret, "sandbox", PREFLIGHT_FAIL, "sandbox-runner-keeper is missing",
                                          "The helper sandbox-runner-keeper was found neither next to the daemon nor "
                                          "in " LIBEXECDIR ".",
                                          "Install sandbox-runner completely (meson install).");
        if (p->proc_fresh && p->disable_userns)
                return preflight_item_set(ret, "sandbox", PREFLIGHT_OK, "usable: fresh /proc, --disable-userns works",
                                          NULL, NULL);
        if (asprintf(&reason, "%s%s%s", !p->proc_fresh ? rep.reason ?: "a fresh /proc is refused here" : "",
                     !p->proc_fresh ? ". " : "",
                     !p->disable_userns ? "bwrap's --disable-userns does not work here: payloads may create user "
                                          "namespaces of their own." : "") < 0)
                return -ENOMEM;
        return preflight_item_set(ret, "sandbox", PREFLIGHT_WARN,
                                  !p->proc_fresh ? "usable, /proc is a read-only bind of the host's"
                                                 : "usable, without --disable-userns",
                                  reason,
                                  !p->disable_userns && !p->proc_fresh ?
                                  "Let bwrap mount a fresh /proc (in a container: an unmasked /proc), and install "
                                  "bubblewrap 0.8 or later." :
                                  !p->proc_fresh ? "Let bwrap mount a fresh /proc: in a container, give it an unmasked "
                                                   "/proc (no read-only overmounts of /proc/sys and the like)." :
                                  "Install bubblewrap 0.8 or later (--disable-userns needs it and a kernel with "
                                  "user.max_user_namespaces).");
}

/* Why scopes are not to be had: no bus, the rule where polkitd does not read it, or not authorised. */
static int scopes_why(const PreflightPaths *p, int r, const char *scope_reason, char **ret) {
        _cleanup_free_ char *rule = NULL;

        if (r == -ENOTCONN)
                return asprintf(ret, "There are no transient scopes: %s.", scope_reason) < 0 ? -ENOMEM : 0;
        if (preflight_find_polkit_rule(p->root, &rule) == -ENOENT)
                return asprintf(ret, "There are no transient scopes: the polkit rule " PREFLIGHT_POLKIT_RULE " is in "
                                "neither /etc/polkit-1/rules.d nor /usr/share/polkit-1/rules.d, the directories "
                                "polkitd reads (this build installs it into " POLKIT_RULES_DIR "); %s.",
                                scope_reason) < 0 ? -ENOMEM : 0;
        return asprintf(ret, "There are no transient scopes: this user is not authorised (%s is there): %s.", rule,
                        scope_reason) < 0 ? -ENOMEM : 0;
}

static const char *scopes_fix(int r, bool rule_missing) {
        if (r == -ENOTCONN)
                return "Run the daemon as sandbox-runner.service under systemd, or start it as root (it then uses "
                       "cgroups of its own), or set [Execution] AllowUnscoped=yes to accept rlimits only.";
        if (rule_missing)
                return "Install the rule where polkitd reads it: copy " POLKIT_RULES_DIR "/" PREFLIGHT_POLKIT_RULE
                       " to /etc/polkit-1/rules.d/, or rebuild with meson's default -Dpolkitrulesdir=.";
        return "Check that the rule " PREFLIGHT_POLKIT_RULE " names the user the daemon runs as (meson "
               "-Dservice-user=) and that polkitd runs (systemctl status polkit).";
}

/* The limit mechanism, decided as start-up decides it (setup_identity(), manager_probe()). */
static int check_limits(const Config *c, const PreflightPaths *p, PreflightItem *ret) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *scope_reason = NULL, *cg_desc = NULL, *cg_reason = NULL, *why = NULL, *summary = NULL,
                *note = NULL, *user = this_user(), *reason = NULL, *rule = NULL;
        ScopeManager *sm = NULL;
        bool as_root = geteuid() == 0, cgroups = false;
        LimitsMechanism l;
        int r, rs;

        if (!user)
                return -ENOMEM;
        if (as_root) {
                _cleanup_(identity_done) Identity id = {};
                _cleanup_free_ char *why_not = NULL;

                r = identity_resolve(c->sandbox_user, &id, &why_not);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        if (asprintf(&reason, "Started as root, the daemon becomes [Execution] SandboxUser= first, "
                                     "but %s: executions are refused.", why_not) < 0)
                                return -ENOMEM;
                        return preflight_item_set(ret, "limits", PREFLIGHT_FAIL, "no sandbox user", reason,
                                                  "Create the user (systemd-sysusers) or set [Execution] SandboxUser= "
                                                  "to an existing user other than root.");
                }
        }
        if (privileges_own_cgroups_wanted()) {
                r = cgroup_root_check(as_root, &cg_desc, &cg_reason);
                if (r == -ENOMEM)
                        return r;
                cgroups = r >= 0;
        }

        r = sd_event_new(&e);
        if (r < 0)
                return r;
        rs = scope_manager_open_system(e, &bus, &sm, &scope_reason);
        sm = scope_manager_free(sm);
        if (rs == -ENOMEM)
                return rs;
        l = manager_decide_limits(rs >= 0, cgroups);
        if (rs < 0 && scopes_why(p, rs, scope_reason, &why) < 0)
                return -ENOMEM;
        if (!is_service_user() &&
            asprintf(&note, "This answer is for %s; the service runs as '" SERVICE_USER "': check as it with "
                     "'runuser -u " SERVICE_USER " -- %s --check'.", user, program_invocation_name) < 0)
                return -ENOMEM;

        if (l == LIMITS_SYSTEMD_SCOPE)
                return preflight_item_set(ret, "limits", PREFLIGHT_OK, "a transient systemd scope per execution",
                                          note, NULL);
        if (l == LIMITS_CGROUP) {
                if (asprintf(&summary, "the daemon's own cgroups (%s)", cg_desc) < 0 ||
                    asprintf(&reason, "%s%s%s", why, note ? " " : "", note ?: "") < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "limits", PREFLIGHT_OK, summary, reason, NULL);
        }
        if (asprintf(&reason, "%s No cgroups of the daemon's own either: %s.%s%s", why,
                     cg_reason ?: "this host is booted with systemd, where the daemon uses scopes only",
                     note ? " " : "", note ?: "") < 0)
                return -ENOMEM;
        return preflight_item_set(ret, "limits", c->allow_unscoped ? PREFLIGHT_WARN : PREFLIGHT_FAIL,
                                  c->allow_unscoped ? "rlimits only (weaker: no memory, CPU or task accounting)"
                                                    : "none: executions are refused without [Execution] AllowUnscoped=yes",
                                  reason, scopes_fix(rs, preflight_find_polkit_rule(p->root, &rule) == -ENOENT));
}

/* One secret: the file the daemon would read, else the one the unit's LoadCredential= would load. */
static int check_one_secret(const PreflightPaths *p, const char *credential, const char *configured, const char *key,
                            char **ret_path, char **ret_problem) {
        static const char *const credstore[] = { "/etc/credstore", "/run/credstore", "/usr/lib/credstore" };
        _cleanup_free_ char *path = NULL;
        int r;

        r = secrets_path(credential, configured, &path);
        if (r == -ENOMEM)
                return r;
        if (r >= 0) {
                r = preflight_check_secret_file(path, true, ret_problem);
                *ret_path = STEAL(path);
                return r;
        }
        /* Not started by the unit here: what LoadCredential=NAME:sandbox-runner.NAME would load
         * (systemd reads it as root). */
        for (size_t i = 0; i < ELEMENTSOF(credstore); i++) {
                path = mfree(path);
                if (asprintf(&path, "%s%s/sandbox-runner.%s", p->root, credstore[i], credential) < 0)
                        return -ENOMEM;
                if (access(path, F_OK) == 0) {
                        r = preflight_check_secret_file(path, false, ret_problem);
                        *ret_path = STEAL(path);
                        return r;
                }
        }
        return set_message(ret_problem, -ENOKEY, "There is no %s: neither $CREDENTIALS_DIRECTORY/%s, [Auth] %s= nor "
                           "/etc/credstore/sandbox-runner.%s (the service's LoadCredential=) exists.",
                           credential, credential, key, credential);
}

static int check_credentials(const Config *c, const PreflightPaths *p, PreflightItem *ret) {
        _cleanup_free_ char *tpath = NULL, *kpath = NULL, *tproblem = NULL, *kproblem = NULL, *summary = NULL,
                *reason = NULL;
        int rt, rk;

        rt = check_one_secret(p, "api-token", c->token_file, "TokenFile", &tpath, &tproblem);
        if (rt == -ENOMEM)
                return rt;
        rk = check_one_secret(p, "signing-key", c->signing_key_file, "SigningKeyFile", &kpath, &kproblem);
        if (rk == -ENOMEM)
                return rk;
        if (rt >= 0 && rk >= 0) {
                if (asprintf(&summary, "api-token in %s, signing-key in %s", tpath, kpath) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "credentials", PREFLIGHT_OK, summary, NULL, NULL);
        }
        if (asprintf(&reason, "%s%s%s", tproblem ?: "", tproblem && kproblem ? " " : "", kproblem ?: "") < 0)
                return -ENOMEM;
        return preflight_item_set(ret, "credentials", PREFLIGHT_FAIL,
                                  rt == -ENOKEY || rk == -ENOKEY ? "a secret is missing" : "a secret file is unusable",
                                  reason,
                                  "Write each secret (32 random bytes as hex) with umask 077, owned by root, e.g. "
                                  "/etc/credstore/sandbox-runner.api-token and .signing-key (see README), or point "
                                  "[Auth] TokenFile=/SigningKeyFile= at such files; chmod o= an existing one.");
}

/* The nearest existing directory at or above @path: whether this user may create @path there. */
static bool can_create(const char *path) {
        _cleanup_free_ char *d = strdup(path);
        char *slash;

        while (d && (slash = strrchr(d, '/'))) {
                *slash = '\0';
                if (access(isempty(d) ? "/" : d, F_OK) == 0)
                        return access(isempty(d) ? "/" : d, W_OK | X_OK) == 0;
        }
        return false;
}

static int check_state(const PreflightPaths *p, PreflightItem *ret) {
        _cleanup_free_ char *state = NULL, *runtime = NULL, *summary = NULL, *reason = NULL, *fix = NULL;
        struct passwd *pw = getpwnam(SERVICE_USER);
        struct statvfs sv;
        struct stat st;
        uint64_t avail;
        int r;

        r = manager_directory_paths(&state, &runtime);
        if (r < 0)
                return r;
        if (stat(state, &st) < 0) {
                bool creatable = can_create(state);
                if (asprintf(&summary, "%s does not exist%s", state, creatable ? " yet" : "") < 0 ||
                    asprintf(&reason, "%s", creatable ? "The daemon creates it (mode 0700) when it starts."
                             : "This user cannot create it; the service's StateDirectory= does.") < 0 ||
                    asprintf(&fix, "Start the daemon as sandbox-runner.service (StateDirectory=), or create it: "
                             "install -d -m 0700 -o " SERVICE_USER " %s.", state) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "state", creatable ? PREFLIGHT_OK : PREFLIGHT_WARN, summary, reason,
                                          fix);
        }
        avail = statvfs(state, &sv) == 0 ? (uint64_t) sv.f_bavail * sv.f_frsize : UINT64_MAX;
        if (!pw || st.st_uid != pw->pw_uid || (st.st_mode & 07777) != 0700) {
                if (asprintf(&summary, "%s: owner uid %u, mode %04o", state, (unsigned) st.st_uid,
                             (unsigned) (st.st_mode & 07777)) < 0 ||
                    asprintf(&reason, "%s", !pw ? "The service user '" SERVICE_USER "' does not exist." :
                             st.st_uid != pw->pw_uid ? "It should belong to the service user '" SERVICE_USER "'." :
                             "Its mode should be 0700: workspaces and snapshots are private to the daemon.") < 0 ||
                    (pw ? asprintf(&fix, "Run 'chown -R " SERVICE_USER ": %s' and 'chmod 0700 %s' (the service's "
                                   "StateDirectory= does both).", state, state)
                        : asprintf(&fix, "Create the user: systemd-sysusers (sysusers.d/sandbox-runner.conf).")) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "state", PREFLIGHT_WARN, summary, reason, fix);
        }
        if (avail < PREFLIGHT_STATE_FREE_MIN) {
                if (asprintf(&summary, "%s: %llu MiB free", state, (unsigned long long) (avail >> 20)) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "state", PREFLIGHT_WARN, summary,
                                          "Less than 1 GiB is free where workspaces, snapshots and environments live.",
                                          "Free space on that file system, or point $STATE_DIRECTORY (the service's "
                                          "StateDirectory=) elsewhere.");
        }
        if (asprintf(&summary, "%s, owned by " SERVICE_USER ", mode 0700, %llu MiB free", state,
                     (unsigned long long) (avail >> 20)) < 0)
                return -ENOMEM;
        return preflight_item_set(ret, "state", PREFLIGHT_OK, summary, NULL, NULL);
}

static int check_egress(PreflightItem *ret) {
        _cleanup_free_ char *gateway = find_helper("egress", "sandbox-runner-egress"),
                *bridge = find_helper("bridge", "sandbox-runner-bridge"), *state = NULL, *runtime = NULL,
                *dir = NULL, *summary = NULL, *reason = NULL;
        int r;

        r = manager_directory_paths(&state, &runtime);
        if (r < 0)
                return r;
        if (asprintf(&dir, "%s/egress", runtime) < 0)
                return -ENOMEM;
        if (!gateway || !bridge) {
                if (asprintf(&reason, "The helper %s was found neither next to the daemon nor in " LIBEXECDIR
                             ": executions with a network policy fail.",
                             !gateway ? "sandbox-runner-egress" : "sandbox-runner-bridge") < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "egress", PREFLIGHT_FAIL, "a helper is missing", reason,
                                          "Install sandbox-runner completely (meson install).");
        }
        if (access(dir, F_OK) < 0 && !can_create(dir)) {
                if (asprintf(&summary, "%s cannot be created by this user", dir) < 0)
                        return -ENOMEM;
                return preflight_item_set(ret, "egress", PREFLIGHT_WARN, summary,
                                          "The gateways' sockets live there; the service's RuntimeDirectory= makes "
                                          "its parent.",
                                          "Start the daemon as sandbox-runner.service, or set $RUNTIME_DIRECTORY to a "
                                          "directory this user may write.");
        }
        if (asprintf(&summary, "gateway %s, bridge %s, sockets in %s", gateway, bridge, dir) < 0)
                return -ENOMEM;
        return preflight_item_set(ret, "egress", PREFLIGHT_OK, summary, NULL, NULL);
}

/* Appends the ScienceDiscovery listeners of @list ("[DIALECT=]ADDRESS") to @joined, quoted. */
static int join_sd_listeners(char *const *list, char **joined, size_t *n) {
        for (char *const *l = list; l && *l; l++) {
                const char *address;
                char *j;

                if (http_dialect_split_listen(*l, &address) != HTTP_DIALECT_SCIENCEDISCOVERY)
                        continue;
                if (asprintf(&j, "%s%s'%s'", *joined ?: "", *joined ? ", " : "", address) < 0)
                        return -ENOMEM;
                free(*joined);
                *joined = j;
                (*n)++;
        }
        return 0;
}

int preflight_check_dialects(char *const *listen, char *const *sockets, PreflightItem *ret) {
        _cleanup_free_ char *from_listen = NULL, *from_sockets = NULL, *summary = NULL;
        size_t n_listen = 0, n_sockets = 0;

        if (join_sd_listeners(listen, &from_listen, &n_listen) < 0 ||
            join_sd_listeners(sockets, &from_sockets, &n_sockets) < 0)
                return -ENOMEM;
        if (n_listen + n_sockets == 0)
                return 0;
        if (asprintf(&summary, "%s%s%s%s%s speak%s the ScienceDiscovery dialect, whose signature covers less than ours",
                     n_listen ? "Listen= " : "", from_listen ?: "", n_listen && n_sockets ? " and " : "",
                     n_sockets == 0 ? "" : n_sockets == 1 ? "the socket " : "the sockets ", from_sockets ?: "", n_listen + n_sockets == 1 ? "s" : "") < 0)
                return -ENOMEM;
        return preflight_item_set(ret, "dialects", PREFLIGHT_WARN, summary,
                                  "There a client authenticates with the bearer token and signs only the timestamp "
                                  "and the body (hex HMAC-SHA256 over \"<ms>\\n<SHA-256 of the body>\", +/-30 s), "
                                  "keyed with that same token: the method, path and query are not signed and there "
                                  "is no nonce, so a captured request's signature stays good on every signed route "
                                  "for 30 s (only a used executionId is refused), and whoever reads the token can "
                                  "sign. Our own API (v1) signs the method, path, query, timestamp and body with a "
                                  "separate signing key, and refuses a used executionId likewise.",
                                  "Keep that listener on loopback or a Unix socket (or behind a TLS proxy) for their "
                                  "API server alone, and give every other client our own API.") < 0 ? -ENOMEM : 1;
}

int preflight_run(const Config *c, const PreflightPaths *p, char *const *sockets, PreflightReport *ret) {
        PreflightItem *it = ret->items;
        int r;

        *ret = (PreflightReport) {};
        r = check_bwrap(c, &it[ret->n++]);
        if (r >= 0)
                r = preflight_check_userns(p, c->bwrap, &it[ret->n++]);
        if (r >= 0)
                r = check_sandbox(c, &it[ret->n++]);
        if (r >= 0)
                r = check_limits(c, p, &it[ret->n++]);
        if (r >= 0)
                r = check_credentials(c, p, &it[ret->n++]);
        if (r >= 0)
                r = check_state(p, &it[ret->n++]);
        if (r >= 0)
                r = check_egress(&it[ret->n++]);
        if (r >= 0) {
                r = preflight_check_dialects(c->listen, sockets, &it[ret->n]);
                if (r > 0)
                        ret->n++;
        }
        return r < 0 ? r : 0;
}
