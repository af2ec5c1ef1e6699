/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `sandbox-runnerctl check`: GET /health judged item by item, and its lines (check-util.h). */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-util.h"
#include "output.h"
#include "util/json-util.h"
#include "util/macro.h"

#define FIX_HOST "Run 'sandbox-runnerd --check' on the daemon's host, as the service user, for what it lacks."

static const char *str(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) ?
                json_object_get_string(v) : NULL;
}

static bool boolean(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_boolean) &&
                json_object_get_boolean(v);
}

static int64_t integer(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_int) ?
                json_object_get_int64(v) : 0;
}

static json_object *object(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_object) ? v : NULL;
}

/* Append {"id", "status", "summary", "reason"?, "fix"?} to @checks. Return: 0 or -ENOMEM. */
static int add(json_object *checks, const char *id, const char *status, const char *summary, const char *reason,
               const char *fix) {
        _cleanup_(json_object_putp) json_object *c = json_object_new_object();

        if (!c ||
            json_object_object_add(c, "id", json_object_new_string(id)) < 0 ||
            json_object_object_add(c, "status", json_object_new_string(status)) < 0 ||
            json_object_object_add(c, "summary", json_object_new_string(summary)) < 0 ||
            (reason && json_object_object_add(c, "reason", json_object_new_string(reason)) < 0) ||
            (fix && !streq(status, "ok") && json_object_object_add(c, "fix", json_object_new_string(fix)) < 0))
                return -ENOMEM;
        if (json_object_array_add(checks, c) < 0)
                return -ENOMEM;
        c = NULL;
        return 0;
}

static int add_sandbox(json_object *checks, json_object *health) {
        json_object *s = object(health, "sandbox");
        const char *proc = str(s, "proc"), *bwrap = str(s, "bwrap");
        bool fresh = proc && streq(proc, "fresh"), userns = boolean(s, "disableUserns");
        _cleanup_free_ char *summary = NULL;

        if (!s || !boolean(s, "usable"))
                return add(checks, "sandbox", "fail", "no sandbox can be built", str(s, "reason") ?: "The daemon says "
                           "nothing of its sandbox.", FIX_HOST);
        if (!boolean(s, "executions"))
                return add(checks, "sandbox", "fail", "executions are refused", str(s, "executionsRefused"), FIX_HOST);
        if (fresh && userns) {
                if (asprintf(&summary, "usable: fresh /proc, --disable-userns works%s%s%s", bwrap ? " (" : "",
                             bwrap ?: "", bwrap ? ")" : "") < 0)
                        return -ENOMEM;
                return add(checks, "sandbox", "ok", summary, NULL, NULL);
        }
        return add(checks, "sandbox", "warn",
                   !fresh ? "usable, /proc is a read-only bind of the host's" : "usable, without --disable-userns",
                   str(s, "reason") ?: (!userns ? "bwrap's --disable-userns does not work on the daemon's host: "
                                                  "payloads may create user namespaces of their own." : NULL),
                   !fresh ? "Let bwrap mount a fresh /proc: in a container, give it an unmasked /proc."
                          : "Install bubblewrap 0.8 or later on the daemon's host.");
}

static int add_limits(json_object *checks, json_object *health) {
        json_object *s = object(health, "scopes");
        const char *mech = str(s, "mechanism"), *limits = str(s, "limits");
        _cleanup_free_ char *summary = NULL, *reason = NULL;

        if (mech && streq(mech, "systemd-scope"))
                return add(checks, "limits", "ok", "a transient systemd scope per execution", NULL, NULL);
        if (mech && streq(mech, "cgroup")) {
                if (asprintf(&summary, "the daemon's own cgroups (%s)", str(s, "cgroup") ?: "?") < 0 ||
                    asprintf(&reason, "There are no transient scopes: %s.", str(s, "reason") ?: "the daemon does not say why") < 0)
                        return -ENOMEM;
                return add(checks, "limits", "ok", summary, reason, NULL);
        }
        if (asprintf(&reason, "There are no transient scopes: %s.%s%s%s", str(s, "reason") ?: "the daemon does not say why",
                     str(s, "cgroupReason") ? " No cgroups of the daemon's own either: " : "",
                     str(s, "cgroupReason") ?: "", str(s, "cgroupReason") ? "." : "") < 0)
                return -ENOMEM;
        if (!mech || !limits || streq(limits, "none"))
                return add(checks, "limits", "fail", "none: executions are refused without [Execution] AllowUnscoped=yes",
                           reason, FIX_HOST);
        return add(checks, "limits", "warn", "rlimits only (weaker: no memory, CPU or task accounting)", reason,
                   FIX_HOST);
}

static int add_egress(json_object *checks, json_object *health) {
        json_object *n = object(health, "sandboxNetwork");
        const char *mode = str(n, "mode");
        _cleanup_free_ char *summary = NULL;

        if (!n || !mode)
                return add(checks, "egress", "fail", "unknown", "The daemon says nothing of the sandboxes' network.",
                           FIX_HOST);
        if (!boolean(n, "available"))
                return add(checks, "egress", "fail", "the network policy cannot be applied",
                           str(n, "reason") ?: "The daemon does not say why.",
                           "Install sandbox-runner completely (the egress gateway and the bridge); " FIX_HOST);
        if (streq(mode, "none"))
                return add(checks, "egress", "ok", "no network policy: sandboxes have no network", NULL, NULL);
        if (asprintf(&summary, "%s policy, revision %s, gateway %s%s", mode, str(n, "revision") ?: "?",
                     str(n, "gateway") ?: "?", boolean(n, "gatewayRunning") ? " (running)" : "") < 0)
                return -ENOMEM;
        return add(checks, "egress", "ok", summary, NULL, NULL);
}

static int add_environments(json_object *checks, json_object *health) {
        json_object *e = object(health, "environments");
        _cleanup_free_ char *summary = NULL;
        int64_t failed = integer(e, "failed");

        if (!e || str(e, "reason"))
                return add(checks, "environments", "warn", "environments are unavailable",
                           str(e, "reason") ?: "The daemon says nothing of its environments.", FIX_HOST);
        if (asprintf(&summary, "%" PRIi64 " ready, %" PRIi64 " pending, %" PRIi64 " building, %" PRIi64 " failed",
                     integer(e, "ready"), integer(e, "pending"), integer(e, "building"), failed) < 0)
                return -ENOMEM;
        if (failed > 0)
                return add(checks, "environments", "warn", summary, "A setup of an environment failed.",
                           "See 'sandbox-runnerctl env list' and retry with 'sandbox-runnerctl env setup --retry'.");
        return add(checks, "environments", "ok", summary, NULL, NULL);
}

static int add_npu(json_object *checks, json_object *health) {
        json_object *n = object(health, "npu"), *broker = object(n, "broker");
        const char *phase = str(n, "phase");
        _cleanup_free_ char *summary = NULL;

        if (!n || !boolean(n, "enabled")) {
                if (str(n, "reason"))
                        return add(checks, "npu", "warn", "enabled, but unavailable", str(n, "reason"), FIX_HOST);
                return add(checks, "npu", "ok", "disabled ([NPU] Enable=no)", NULL, NULL);
        }
        if (phase && streq(phase, "failed"))
                return add(checks, "npu", "warn", "no chip can be used", str(n, "error") ?: "The discovery failed.",
                           "See docs/npu.md; check npu-smi and the device nodes on the daemon's host.");
        if (asprintf(&summary, "%s: %" PRIi64 " chips, %" PRIi64 " selectable, %" PRIi64 " held", phase ?: "?",
                     integer(n, "chips"), integer(n, "selectable"), integer(n, "held")) < 0)
                return -ENOMEM;
        if (broker && !boolean(broker, "enabled") && str(broker, "reason"))
                return add(checks, "npu", "warn", summary, str(broker, "reason"), FIX_HOST);
        return add(checks, "npu", "ok", summary, str(n, "error"), NULL);
}

bool check_report_ok(json_object *report) {
        return boolean(report, "ok");
}

int check_from_health(json_object *health, json_object **ret) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *checks = json_object_new_array();
        bool ok = true;
        int r;

        if (!o || !checks)
                return -ENOMEM;
        r = add_sandbox(checks, health);
        if (r >= 0)
                r = add_limits(checks, health);
        if (r >= 0)
                r = add_egress(checks, health);
        if (r >= 0)
                r = add_environments(checks, health);
        if (r >= 0)
                r = add_npu(checks, health);
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_object_array_length(checks); i++) {
                const char *s = str(json_object_array_get_idx(checks, i), "status");
                ok = ok && !streq(s, "fail");
        }
        if (json_object_object_add(o, "checks", STEAL(checks)) < 0 ||
            json_object_object_add(o, "ok", json_object_new_boolean(ok)) < 0)
                return -ENOMEM;
        *ret = STEAL(o);
        return 0;
}

int check_format(FILE *f, json_object *report) {
        json_object *checks;

        if (!json_object_object_get_ex(report, "checks", &checks) || !json_object_is_type(checks, json_type_array))
                return 0;
        for (size_t i = 0; i < json_object_array_length(checks); i++) {
                json_object *c = json_object_array_get_idx(checks, i);
                const char *status = str(c, "status") ?: "?";
                bool fix = str(c, "fix") && !streq(status, "ok");
                _cleanup_free_ char *id = output_escaped(str(c, "id")), *summary = output_escaped(str(c, "summary")),
                        *reason = str(c, "reason") ? output_escaped(str(c, "reason")) : NULL,
                        *fx = fix ? output_escaped(str(c, "fix")) : NULL;

                if (!id || !summary || (str(c, "reason") && !reason) || (fix && !fx))
                        return -ENOMEM;
                fprintf(f, "%-4s  %-11s  %s%s%s%s%s\n", status, id, summary, reason ? ". " : "", reason ?: "",
                        fix ? " Fix: " : "", fx ?: "");
        }
        return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}
