/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* manager_probe(): what this host offers executions, decided once at start-up (manager.h). */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build-config.h"
#include "core/manager.h"
#include "execution/keeper-pool.h"
#include "sandbox/cgroup.h"
#include "sandbox/scope.h"
#include "util/helper-path.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"

int manager_probe(Manager *m) {
        int r;

        r = sandbox_probe(m->config.bwrap, &m->probe);
        if (r >= 0 && m->probe.usable && !m->keeper_path) {
                _cleanup_free_ char *path = find_helper("keeper", "sandbox-runner-keeper");
                int fd = path ? open(path, O_PATH | O_CLOEXEC) : -EBADF;

                /* Keepers are started from the file found now, by fd: a package upgrade that
                 * replaces it while we run (a new job format, say) does not reach this daemon,
                 * whose keepers stay of its own version until it restarts. */
                if (fd >= 0 && asprintf(&m->keeper_path, "/proc/self/fd/%d", fd) >= 0)
                        m->keeper_fd = fd;
                else {
                        safe_close(fd);
                        m->probe.usable = false;
                        free(m->probe.reason);
                        m->probe.reason = strdup("sandbox-runner-keeper was found neither next to the daemon nor in "
                                                 LIBEXECDIR);
                }
        }
        if (r >= 0 && m->probe.usable && m->exec_helper_fd < 0 && m->config.prebuilt > 0) {
                _cleanup_free_ char *path = find_helper("keeper", "sandbox-runner-exec");

                /* By fd too, as the keeper; without it, no sandbox is built ahead. */
                m->exec_helper_fd = path ? open(path, O_PATH | O_CLOEXEC) : -EBADF;
                if (m->exec_helper_fd < 0)
                        log_warning("sandbox-runner-exec was found neither next to the daemon nor in " LIBEXECDIR
                                    ": no sandbox is built ahead of its run ([Execution] Prebuilt=%u).",
                                    m->config.prebuilt);
        }
        if (r < 0)
                return log_oom();
        log_struct(m->probe.usable ? (m->probe.probe.proc_fresh ? LOG_INFO : LOG_WARNING) : LOG_ERR,
                   "MESSAGE_ID=" SR_MESSAGE_PROBE_RESULT,
                   "SANDBOX_PROBE=sandbox",
                   "SANDBOX_USABLE=%s", m->probe.usable ? "yes" : "no",
                   "SANDBOX_PROC=%s", m->probe.probe.proc_fresh ? "fresh" : "ro-bind",
                   "SANDBOX_DISABLE_USERNS=%s", m->probe.probe.disable_userns ? "yes" : "no",
                   "SANDBOX_BWRAP_VERSION=%s", m->probe.bwrap_version ?: "unknown",
                   "MESSAGE=Sandbox probe: %s, /proc %s, --disable-userns %s%s%s.",
                   m->probe.usable ? "usable" : "UNUSABLE",
                   m->probe.probe.proc_fresh ? "fresh" : "read-only bind",
                   m->probe.probe.disable_userns ? "works" : "unavailable",
                   m->probe.reason ? ": " : "", m->probe.reason ?: "");

        /* One system bus for the scopes and the egress units. */
        r = scope_manager_open_system(m->event, &m->bus, &m->scopes, &m->scopes_reason);
        if (r == -ENOMEM)
                return log_oom();
        m->scopes_available = r >= 0;
        m->limits = manager_decide_limits(m->scopes_available, !!m->cgroups);
        log_struct(m->limits != LIMITS_RLIMIT ? LOG_INFO : (m->config.allow_unscoped ? LOG_WARNING : LOG_ERR),
                   "MESSAGE_ID=" SR_MESSAGE_PROBE_RESULT,
                   "SANDBOX_PROBE=scopes",
                   "SANDBOX_USABLE=%s", m->scopes_available ? "yes" : "no",
                   "SANDBOX_LIMITS=%s", limits_mechanism_to_string(m->limits),
                   "MESSAGE=Transient scopes %s%s%s%s%s%s.",
                   m->scopes_available ? "available" : "UNAVAILABLE",
                   m->scopes_reason ? ": " : "", m->scopes_reason ?: "",
                   m->limits == LIMITS_CGROUP ? "; limits enforced by the daemon's own cgroups: " : "",
                   m->limits == LIMITS_CGROUP ? cgroup_root_describe(m->cgroups) : "",
                   m->limits != LIMITS_RLIMIT ? "" :
                   (m->config.allow_unscoped ? "; running executions without scopes (AllowUnscoped=yes), "
                                               "limits enforced by rlimits only"
                                             : "; executions are refused (set [Execution] AllowUnscoped=yes to run "
                                               "them with rlimits only)"));
        if (m->limits == LIMITS_RLIMIT && m->cgroups_reason)
                log_info("No cgroups of the daemon's own either: %s.", m->cgroups_reason);
        if (m->probe.usable && !m->keeper_pool) {
                /* Two: a run and the next one's start overlap (a client that sends its next
                 * request as soon as it has the answer). */
                r = keeper_pool_new(m->event, m->keeper_path, 2, &m->keeper_pool);
                if (r < 0)
                        log_warning_errno(r, "Failed to start keepers ahead of runs, starting them per run: %m");
                else if (m->limits == LIMITS_CGROUP)
                        keeper_pool_set_attach(m->keeper_pool, execution_keeper_attach, execution_keeper_detach,
                                               m->cgroups);
        }
        return 0;
}
