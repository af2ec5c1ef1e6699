/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/ctl/check-util.c: GET /health answers judged item by item (sandbox, limits,
 * egress, environments, npu), the report's "ok", and its lines with server strings escaped. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "check-util.h"

#define ELEMENTS(x) (sizeof(x) / sizeof((x)[0]))

/* A healthy answer, as api-health.c writes it; the cases replace parts of it. */
#define SANDBOX_OK "\"sandbox\":{\"usable\":true,\"proc\":\"fresh\",\"disableUserns\":true,\"bwrap\":\"bubblewrap 0.8.0\"," \
                   "\"executions\":true}"
#define SCOPES_OK  "\"scopes\":{\"available\":true,\"mechanism\":\"systemd-scope\",\"limits\":\"scope\"}"
#define NET_OK     "\"sandboxNetwork\":{\"mode\":\"none\",\"available\":true}"
#define ENV_OK     "\"environments\":{\"pending\":0,\"building\":0,\"ready\":2,\"failed\":0,\"offline\":false,\"setup\":[]}"
#define NPU_OK     "\"npu\":{\"enabled\":false}"

static json_object *report_of(const char *health_text) {
        json_object *health = json_tokener_parse(health_text), *report = NULL;

        assert_non_null(health);
        assert_int_equal(check_from_health(health, &report), 0);
        json_object_put(health);
        return report;
}

static json_object *item(json_object *report, const char *id) {
        json_object *checks = json_object_object_get(report, "checks");

        for (size_t i = 0; i < json_object_array_length(checks); i++) {
                json_object *c = json_object_array_get_idx(checks, i);
                if (strcmp(json_object_get_string(json_object_object_get(c, "id")), id) == 0)
                        return c;
        }
        fail_msg("no item '%s'", id);
        return NULL;
}

static const char *field(json_object *c, const char *key) {
        json_object *v = json_object_object_get(c, key);

        return v ? json_object_get_string(v) : NULL;
}

static void test_items(void **state) {
        static const struct {
                const char *health;
                const char *id, *status, *in_summary, *in_reason;   /* in_reason NULL: no reason */
                bool ok;
        } cases[] = {
                { "{" SANDBOX_OK "," SCOPES_OK "," NET_OK "," ENV_OK "," NPU_OK "}",
                  "sandbox", "ok", "fresh /proc, --disable-userns works (bubblewrap 0.8.0)", NULL, true },
                { "{" SANDBOX_OK "," SCOPES_OK "," NET_OK "," ENV_OK "," NPU_OK "}",
                  "limits", "ok", "transient systemd scope", NULL, true },
                { "{" SANDBOX_OK "," SCOPES_OK "," NET_OK "," ENV_OK "," NPU_OK "}",
                  "egress", "ok", "no network policy", NULL, true },
                { "{" SANDBOX_OK "," SCOPES_OK "," NET_OK "," ENV_OK "," NPU_OK "}",
                  "environments", "ok", "2 ready, 0 pending, 0 building, 0 failed", NULL, true },
                { "{" SANDBOX_OK "," SCOPES_OK "," NET_OK "," ENV_OK "," NPU_OK "}",
                  "npu", "ok", "disabled", NULL, true },
                { "{\"sandbox\":{\"usable\":false,\"reason\":\"no sandbox could be built: setting up uid map: "
                  "Permission denied\"}," SCOPES_OK "," NET_OK "," ENV_OK "," NPU_OK "}",
                  "sandbox", "fail", "no sandbox", "uid map: Permission denied", false },
                { "{\"sandbox\":{\"usable\":true,\"proc\":\"fresh\",\"disableUserns\":true,\"executions\":false,"
                  "\"executionsRefused\":\"Started as root, but user 'x' does not exist\"}," SCOPES_OK "," NET_OK ","
                  ENV_OK "," NPU_OK "}",
                  "sandbox", "fail", "executions are refused", "user 'x' does not exist", false },
                { "{\"sandbox\":{\"usable\":true,\"proc\":\"ro-bind\",\"disableUserns\":true,\"executions\":true,"
                  "\"reason\":\"a fresh /proc is refused here\"}," SCOPES_OK "," NET_OK "," ENV_OK "," NPU_OK "}",
                  "sandbox", "warn", "read-only bind", "fresh /proc is refused", true },
                { "{\"sandbox\":{\"usable\":true,\"proc\":\"fresh\",\"disableUserns\":false,\"executions\":true},"
                  SCOPES_OK "," NET_OK "," ENV_OK "," NPU_OK "}",
                  "sandbox", "warn", "without --disable-userns", "--disable-userns does not work", true },
                { "{" SANDBOX_OK ",\"scopes\":{\"available\":false,\"reason\":\"cannot connect to the system bus: No "
                  "such file or directory\",\"mechanism\":\"cgroup\",\"cgroup\":\"cgroup v2 under /x/sandbox-runner\"},"
                  NET_OK "," ENV_OK "," NPU_OK "}",
                  "limits", "ok", "own cgroups (cgroup v2 under /x/sandbox-runner)", "system bus", true },
                { "{" SANDBOX_OK ",\"scopes\":{\"available\":false,\"reason\":\"a test scope could not be created: "
                  "Interactive authentication required.\",\"mechanism\":\"rlimit\",\"limits\":\"rlimit (weaker)\"},"
                  NET_OK "," ENV_OK "," NPU_OK "}",
                  "limits", "warn", "rlimits only", "Interactive authentication required", true },
                { "{" SANDBOX_OK ",\"scopes\":{\"available\":false,\"reason\":\"no bus\",\"mechanism\":\"rlimit\","
                  "\"limits\":\"none\",\"cgroupReason\":\"not delegated\"}," NET_OK "," ENV_OK "," NPU_OK "}",
                  "limits", "fail", "executions are refused", "No cgroups of the daemon's own either: not delegated",
                  false },
                { "{" SANDBOX_OK "," SCOPES_OK ",\"sandboxNetwork\":{\"mode\":\"allowlist\",\"revision\":\"r3\","
                  "\"gateway\":\"systemd\",\"gatewayRunning\":true,\"available\":true}," ENV_OK "," NPU_OK "}",
                  "egress", "ok", "allowlist policy, revision r3, gateway systemd (running)", NULL, true },
                { "{" SANDBOX_OK "," SCOPES_OK ",\"sandboxNetwork\":{\"mode\":\"allowlist\",\"available\":false,"
                  "\"reason\":\"the sandbox-runner-bridge helper is not installed\"}," ENV_OK "," NPU_OK "}",
                  "egress", "fail", "cannot be applied", "bridge helper is not installed", false },
                { "{" SANDBOX_OK "," SCOPES_OK "," NET_OK ",\"environments\":{\"reason\":\"the store is unusable\"},"
                  NPU_OK "}",
                  "environments", "warn", "unavailable", "store is unusable", true },
                { "{" SANDBOX_OK "," SCOPES_OK "," NET_OK ",\"environments\":{\"ready\":1,\"failed\":1}," NPU_OK "}",
                  "environments", "warn", "1 failed", "failed", true },
                { "{" SANDBOX_OK "," SCOPES_OK "," NET_OK "," ENV_OK ",\"npu\":{\"enabled\":false,\"reason\":\"chips "
                  "are not probed\"}}",
                  "npu", "warn", "unavailable", "chips are not probed", true },
                { "{" SANDBOX_OK "," SCOPES_OK "," NET_OK "," ENV_OK ",\"npu\":{\"enabled\":true,\"phase\":\"ready\","
                  "\"chips\":2,\"selectable\":1,\"held\":0}}",
                  "npu", "ok", "ready: 2 chips, 1 selectable, 0 held", NULL, true },
                { "{" SANDBOX_OK "," SCOPES_OK "," NET_OK "," ENV_OK ",\"npu\":{\"enabled\":true,\"phase\":\"failed\","
                  "\"error\":\"npu-smi not found\"}}",
                  "npu", "warn", "no chip", "npu-smi not found", true },
                /* An empty or odd answer is judged the worst way, never trusted. */
                { "{}", "sandbox", "fail", "no sandbox", "says nothing", false },
                { "{}", "limits", "fail", "refused", "does not say why", false },
                { "{}", "egress", "fail", "unknown", "says nothing", false },
                { "{\"sandbox\":\"yes\",\"scopes\":[1],\"sandboxNetwork\":7}", "sandbox", "fail", "no sandbox", NULL,
                  false },
        };

        for (size_t i = 0; i < ELEMENTS(cases); i++) {
                json_object *report = report_of(cases[i].health), *c;

                print_message("# case %zu\n", i);
                assert_int_equal(json_object_array_length(json_object_object_get(report, "checks")), 5);
                c = item(report, cases[i].id);
                assert_string_equal(field(c, "status"), cases[i].status);
                assert_non_null(strstr(field(c, "summary"), cases[i].in_summary));
                if (cases[i].in_reason) {
                        assert_non_null(field(c, "reason"));
                        assert_non_null(strstr(field(c, "reason"), cases[i].in_reason));
                }
                /* A fix for warn and fail, none for ok. */
                assert_int_equal(!!field(c, "fix"), strcmp(cases[i].status, "ok") != 0);
                assert_int_equal(check_report_ok(report), cases[i].ok);
                json_object_put(report);
        }
}

static void test_order_and_lines(void **state) {
        json_object *report = report_of("{" SANDBOX_OK ",\"scopes\":{\"available\":false,\"reason\":\"no\\u001b]0;x\","
                                         "\"mechanism\":\"rlimit\",\"limits\":\"none\"}," NET_OK "," ENV_OK "," NPU_OK "}");
        static const char *const ids[] = { "sandbox", "limits", "egress", "environments", "npu" };
        json_object *checks = json_object_object_get(report, "checks");
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        for (size_t i = 0; i < ELEMENTS(ids); i++)
                assert_string_equal(field(json_object_array_get_idx(checks, i), "id"), ids[i]);

        f = open_memstream(&buf, &size);
        assert_non_null(f);
        assert_int_equal(check_format(f, report), 0);
        assert_int_equal(fclose(f), 0);
        /* The escape sequence of the server's string is shown, not sent to the terminal. */
        assert_string_equal(buf,
                            "ok    sandbox      usable: fresh /proc, --disable-userns works (bubblewrap 0.8.0)\n"
                            "fail  limits       none: executions are refused without [Execution] AllowUnscoped=yes. "
                            "There are no transient scopes: no\\x1b]0;x. Fix: Run 'sandbox-runnerd --check' on the "
                            "daemon's host, as the service user, for what it lacks.\n"
                            "ok    egress       no network policy: sandboxes have no network\n"
                            "ok    environments  2 ready, 0 pending, 0 building, 0 failed\n"
                            "ok    npu          disabled ([NPU] Enable=no)\n");
        assert_false(check_report_ok(report));
        free(buf);
        json_object_put(report);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_items),
                cmocka_unit_test(test_order_and_lines),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
