/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/npu/cdi*.c, table-driven: a good spec applied exactly, spec-level and device
 * edits combined, every refusal with its reason (of the whole spec, or of one device), the limits,
 * fully-qualified names, the registry over a directory tree (precedence, YAML, broken files, a
 * missing directory, conflicts) and resolution all or nothing.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "npu/cdi.h"
#include "sandbox/sandbox-argv.h"
#include "test-dir.h"
#include "util/macro.h"
#include "util/strv.h"

/* What nvidia-ctk cdi generate --format=json writes (trimmed): spec-level hooks. */
static const char nvidia_spec[] =
        "{\"cdiVersion\":\"0.5.0\",\"kind\":\"nvidia.com/gpu\",\"devices\":["
        "{\"name\":\"0\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/nvidia0\"}]}},"
        "{\"name\":\"all\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/nvidia0\"}]}}],"
        "\"containerEdits\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=void\"],"
        "\"deviceNodes\":[{\"path\":\"/dev/nvidiactl\"},{\"path\":\"/dev/nvidia-uvm\"}],"
        "\"hooks\":[{\"hookName\":\"createContainer\",\"path\":\"/usr/bin/nvidia-ctk\",\"args\":[\"nvidia-ctk\","
        "\"hook\",\"create-symlinks\",\"--link\",\"libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so\"]},"
        "{\"hookName\":\"createContainer\",\"path\":\"/usr/bin/nvidia-ctk\",\"args\":[\"nvidia-ctk\",\"hook\","
        "\"update-ldcache\",\"--folder\",\"/usr/lib/x86_64-linux-gnu\"]}],"
        "\"mounts\":[{\"hostPath\":\"/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05\","
        "\"containerPath\":\"/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05\","
        "\"options\":[\"ro\",\"nosuid\",\"nodev\",\"bind\"]},"
        "{\"hostPath\":\"/usr/bin/nvidia-smi\",\"containerPath\":\"/usr/bin/nvidia-smi\","
        "\"options\":[\"ro\",\"nosuid\",\"nodev\",\"bind\"]}]}}";

/* One device "vendor.com/dev=d" with the containerEdits %s. */
#define DEVICE_SPEC "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\"," \
        "\"containerEdits\":%s}]}"
/* The spec-level containerEdits %s, and one device without edits of its own. */
#define SPEC_LEVEL_SPEC "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"containerEdits\":%s," \
        "\"devices\":[{\"name\":\"d\",\"containerEdits\":{}}]}"

static int parse(const char *json, CdiSpec **ret, char **why) {
        return cdi_spec_parse(json, strlen(json), "test.json", ret, why);
}

static char *format(const char *fmt, const char *arg) {
        char *s;

        assert_true(asprintf(&s, fmt, arg) >= 0);
        return s;
}

/* A registry of @json alone (which must parse). */
static CdiRegistry *registry_of(const char *json) {
        _cleanup_free_ char *why = NULL;
        CdiSpec *spec = NULL;
        CdiRegistry *reg = NULL;
        unsigned prec = 0;
        int r;

        r = parse(json, &spec, &why);
        if (r < 0)
                fail_msg("parse: %d (%s)", r, why ?: "-");
        assert_int_equal(cdi_registry_new_from_specs(&spec, &prec, 1, &reg), 0);
        assert_null(spec);
        return reg;
}

static void assert_strv(char **l, const char *const *want) {
        size_t n = 0;

        for (; want[n]; n++) {
                assert_non_null(l);
                assert_non_null(l[n]);
                assert_string_equal(l[n], want[n]);
        }
        assert_true(!l || !l[n]);
}

static void test_good_spec(void **state) {
        static const char json[] =
                "{\"cdiVersion\":\"1.0.0\",\"kind\":\"example.com/npu\",\"annotations\":{\"a\":\"b\"},"
                "\"devices\":[{\"name\":\"0\",\"annotations\":{\"x\":\"y\"},\"containerEdits\":{"
                "\"deviceNodes\":[{\"path\":\"/dev/example0\",\"type\":\"c\",\"major\":195,\"minor\":0,"
                "\"fileMode\":438,\"permissions\":\"rw\",\"uid\":0,\"gid\":0}],"
                "\"mounts\":[{\"hostPath\":\"/opt/example/lib\",\"containerPath\":\"/opt/example/lib\","
                "\"options\":[\"ro\",\"nosuid\",\"nodev\",\"bind\"],\"type\":\"bind\"}],"
                "\"env\":[\"EXAMPLE_VISIBLE=0\"],\"hooks\":[],\"additionalGids\":[]}}]}";
        _cleanup_(cdi_registry_freep) CdiRegistry *reg = registry_of(json);
        _cleanup_(cdi_edits_done) CdiEdits e = {};
        _cleanup_strv_free_ char **devices = NULL;
        char *names[] = { (char *) "example.com/npu=0", NULL };
        const char *const *what, *const *why;

        devices = cdi_registry_devices(reg);
        assert_strv(devices, (const char *const[]) { "example.com/npu=0", NULL });
        assert_int_equal(cdi_registry_refusals(reg, &what, &why), 0);
        assert_null(what[0]);

        assert_int_equal(cdi_registry_resolve(reg, names, &e, NULL), 0);
        assert_int_equal(e.n_nodes, 1);
        assert_string_equal(e.nodes[0].host_path, "/dev/example0");
        assert_string_equal(e.nodes[0].path, "/dev/example0");
        assert_int_equal(e.n_mounts, 1);
        assert_string_equal(e.mounts[0].host_path, "/opt/example/lib");
        assert_string_equal(e.mounts[0].container_path, "/opt/example/lib");
        assert_strv(e.env, (const char *const[]) { "EXAMPLE_VISIBLE=0", NULL });
        assert_strv(e.visible, (const char *const[]) { NULL });
}

static void test_spec_accessors(void **state) {
        _cleanup_(cdi_spec_freep) CdiSpec *s = NULL;
        _cleanup_free_ char *why = NULL, *json = format(DEVICE_SPEC, "{\"hooks\":[{\"hookName\":\"x\",\"path\":\"/x\"}]}");
        const char *refusal = NULL;

        assert_int_equal(parse(json, &s, &why), 0);
        assert_string_equal(cdi_spec_kind(s), "vendor.com/dev");
        assert_string_equal(cdi_spec_origin(s), "test.json");
        assert_int_equal(cdi_spec_n_devices(s), 1);
        assert_string_equal(cdi_spec_device(s, 0, &refusal), "d");
        assert_non_null(refusal);
        assert_non_null(strstr(refusal, "devices[0].containerEdits.hooks: hooks run host programs"));
        assert_null(cdi_spec_device(s, 1, &refusal));
}

static void test_combined(void **state) {
        static const char json[] =
                "{\"cdiVersion\":\"0.8.0\",\"kind\":\"example.com/npu\",\"containerEdits\":{"
                "\"deviceNodes\":[{\"path\":\"/dev/example_ctl\"}],"
                "\"mounts\":[{\"hostPath\":\"/usr/lib/libexample.so.1\",\"containerPath\":\"/usr/lib/libexample.so.1\"},"
                "{\"hostPath\":\"/srv/example\",\"containerPath\":\"/opt/example\"}],"
                "\"env\":[\"EXAMPLE_DRIVER=1\"]},"
                "\"devices\":["
                "{\"name\":\"1\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/example0\",\"hostPath\":\"/dev/example1\"}],"
                "\"mounts\":[{\"hostPath\":\"/srv/example/1\",\"containerPath\":\"/opt/example/one\"}],"
                "\"env\":[\"EXAMPLE_VISIBLE=1\"]}},"
                "{\"name\":\"0\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/example0\"}]}},"
                "{\"name\":\"2\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/example2\"}],"
                "\"env\":[\"EXAMPLE_VISIBLE=2\"]}}]}";
        _cleanup_(cdi_registry_freep) CdiRegistry *reg = registry_of(json);
        _cleanup_(cdi_edits_done) CdiEdits e = {};
        _cleanup_free_ char *why = NULL;
        char *one[] = { (char *) "example.com/npu=1", (char *) "example.com/npu=1", NULL };
        char *clash_node[] = { (char *) "example.com/npu=1", (char *) "example.com/npu=0", NULL };
        char *clash_env[] = { (char *) "example.com/npu=1", (char *) "example.com/npu=2", NULL };

        /* One device (asked for twice): the spec's edits once, the device's own, each sorted. */
        assert_int_equal(cdi_registry_resolve(reg, one, &e, NULL), 0);
        assert_int_equal(e.n_nodes, 2);
        assert_string_equal(e.nodes[0].path, "/dev/example0");
        assert_string_equal(e.nodes[0].host_path, "/dev/example1");
        assert_string_equal(e.nodes[1].path, "/dev/example_ctl");
        assert_string_equal(e.nodes[1].host_path, "/dev/example_ctl");
        assert_int_equal(e.n_mounts, 2);
        assert_string_equal(e.mounts[0].container_path, "/opt/example");     /* the parent first */
        assert_string_equal(e.mounts[0].host_path, "/srv/example");
        assert_string_equal(e.mounts[1].container_path, "/opt/example/one");
        assert_string_equal(e.mounts[1].host_path, "/srv/example/1");
        assert_strv(e.env, (const char *const[]) { "EXAMPLE_DRIVER=1", "EXAMPLE_VISIBLE=1", NULL });
        assert_strv(e.visible, (const char *const[]) { "/usr/lib/libexample.so.1", NULL });
        for (size_t i = 0; i < e.n_mounts; i++)
                assert_true(sandbox_bind_dest_valid(e.mounts[i].container_path));

        /* Two devices that want /dev/example0 from different host nodes, or one variable with two
         * values, conflict: nothing is returned. */
        cdi_edits_done(&e);
        assert_int_equal(cdi_registry_resolve(reg, clash_node, &e, &why), -EINVAL);
        assert_non_null(strstr(why, "'/dev/example0'"));
        assert_null(e.nodes);
        why = mfree(why);
        assert_int_equal(cdi_registry_resolve(reg, clash_env, &e, &why), -EINVAL);
        assert_non_null(strstr(why, "EXAMPLE_VISIBLE"));
        assert_null(e.env);
}

static void test_nvidia_ctk(void **state) {
        CdiSpec *s = NULL;
        _cleanup_free_ char *why = NULL;

        assert_int_equal(parse(nvidia_spec, &s, &why), -EBADMSG);
        assert_null(s);
        assert_string_equal(why, "containerEdits.hooks: hooks run host programs at container lifecycle points; "
                            "a sandbox cannot run them");
}

/* Whole specs refused, with their reason. */
static void test_spec_refusals(void **state) {
        static const struct {
                const char *json;
                const char *why;
        } cases[] = {
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":{}}],"
                  "\"foo\":1}", "top level: unknown field 'foo'" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"foo\":1,"
                  "\"containerEdits\":{}}]}", "devices[0]: unknown field 'foo'" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":{}},"
                  "{\"name\":\"e\",\"containerEdits\":{\"foo\":[]}}]}", "devices[1].containerEdits: unknown field 'foo'" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"deviceNodes\":[{\"path\":\"/dev/x\",\"foo\":1}]}}]}",
                  "devices[0].containerEdits.deviceNodes[0]: unknown field 'foo'" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"mounts\":[{\"hostPath\":\"/a\",\"containerPath\":\"/opt/a\",\"readonly\":true}]}}]}",
                  "devices[0].containerEdits.mounts[0]: unknown field 'readonly'" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"hooks\":[{\"hookName\":\"x\",\"path\":\"/x\",\"bar\":1}]}}]}",
                  "devices[0].containerEdits.hooks[0]: unknown field 'bar'" },
                { "{\"cdiVersion\":\"0.7.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"intelRdt\":{\"closID\":\"x\",\"bar\":1}}}]}", "devices[0].containerEdits.intelRdt: unknown field 'bar'" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"\\u0001\":1}}]}", "unknown field '\\x01'" },
                /* Malformed JSON: json-c's own words. */
                { "{\"cdiVersion\":\"0.6.0\",", "malformed JSON: the document is incomplete" },
                { "{\"cdiVersion\" \"0.6.0\"}", "malformed JSON: " },
                { "{\"cdiVersion\":'0.6.0'}", "malformed JSON: " },
                { "{} {}", "malformed JSON: " },
                { "{}\n\t ", "missing field 'cdiVersion'" },          /* trailing whitespace is fine */
                { "[1]", "top level: must be an object" },
                { "{\"a\":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}", "malformed JSON: " },
                /* Versions, kinds, devices. */
                { "{\"kind\":\"vendor.com/dev\",\"devices\":[]}", "missing field 'cdiVersion'" },
                { "{\"cdiVersion\":\"0.2.0\",\"kind\":\"vendor.com/dev\",\"devices\":[]}", "cdiVersion: '0.2.0' is not supported" },
                { "{\"cdiVersion\":\"2.0.0\",\"kind\":\"vendor.com/dev\",\"devices\":[]}", "cdiVersion: '2.0.0' is not supported" },
                { "{\"cdiVersion\":\"v0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[]}", "is not supported" },
                { "{\"cdiVersion\":\"0.6\",\"kind\":\"vendor.com/dev\",\"devices\":[]}", "is not supported" },
                { "{\"cdiVersion\":\"0.6.1\",\"kind\":\"vendor.com/dev\",\"devices\":[]}", "is not supported" },
                { "{\"cdiVersion\":\"1.0.0-rc1\",\"kind\":\"vendor.com/dev\",\"devices\":[]}", "is not supported" },
                { "{\"cdiVersion\":6,\"kind\":\"vendor.com/dev\",\"devices\":[]}", "cdiVersion: must be a string" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor/dev\",\"devices\":[]}", "kind: 'vendor/dev' is not vendor/class" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev/x\",\"devices\":[]}", "is not vendor/class" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/\",\"devices\":[]}", "is not vendor/class" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"-vendor.com/dev\",\"devices\":[]}", "is not vendor/class" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor..com/dev\",\"devices\":[]}", "is not vendor/class" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/-dev\",\"devices\":[]}", "is not vendor/class" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[]}", "devices: a spec defines at least one device" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\"}", "missing field 'devices'" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":{}},"
                  "{\"name\":\"d\",\"containerEdits\":{}}]}", "devices[1].name: device 'd' is defined twice" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"-d\",\"containerEdits\":{}}]}",
                  "devices[0].name: '-d' is not a device name" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"a b\",\"containerEdits\":{}}]}",
                  "is not a device name" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"a=b\",\"containerEdits\":{}}]}",
                  "is not a device name" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"\",\"containerEdits\":{}}]}",
                  "is not a device name" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\"}]}",
                  "devices[0]: missing field 'containerEdits'" },
                /* Types. */
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"env\":\"A=1\"}}]}", "devices[0].containerEdits.env: must be an array" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"deviceNodes\":[{\"path\":null}]}}]}", "devices[0].containerEdits.deviceNodes[0].path: must be a string" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"deviceNodes\":[{\"path\":\"/dev/x\",\"uid\":-1}]}}]}", "deviceNodes[0].uid: out of range" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"deviceNodes\":[{\"path\":\"/dev/x\",\"major\":1.5}]}}]}", "deviceNodes[0].major: must be an integer" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"mounts\":[{\"containerPath\":\"/opt/a\"}]}}]}", "mounts[0]: missing field 'hostPath'" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"env\":[\"A=\\u0000\"]}}]}", "env[0]: holds a NUL byte" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"annotations\":{\"a\":1},\"devices\":[]}",
                  "annotations.<value>: must be a string" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"hooks\":[{\"hookName\":\"x\",\"path\":\"/x\",\"timeout\":0}]}}]}", "hooks[0].timeout: out of range" },
                { "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[{\"name\":\"d\",\"containerEdits\":"
                  "{\"additionalGids\":[\"1\"]}}]}", "additionalGids[0]: must be an integer" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *why = NULL;
                CdiSpec *s = NULL;
                int r = parse(cases[i].json, &s, &why);

                if (r != -EBADMSG || !why || !strstr(why, cases[i].why))
                        fail_msg("case %zu: %d, '%s', wanted '%s'", i, r, why ?: "-", cases[i].why);
                assert_null(s);
        }
}

/* Edits a sandbox cannot honour: of a device (the device is refused, the spec kept) or at the
 * spec level (the whole spec is refused), with the same reason. Empty lists are fine. */
static void test_edit_refusals(void **state) {
        static const struct {
                const char *edits;
                const char *why;                /* NULL: honoured */
        } cases[] = {
                { "{\"hooks\":[],\"additionalGids\":[],\"env\":[],\"deviceNodes\":[],\"mounts\":[]}", NULL },
                { "{\"hooks\":[{\"hookName\":\"createContainer\",\"path\":\"/usr/bin/nvidia-ctk\",\"args\":[\"a\"],"
                  "\"env\":[\"A=1\"],\"timeout\":5}]}",
                  "containerEdits.hooks: hooks run host programs at container lifecycle points; a sandbox cannot run them" },
                { "{\"additionalGids\":[44]}", "containerEdits.additionalGids: a sandbox runs as one user in one group" },
                { "{\"intelRdt\":{}}", "containerEdits.intelRdt: Intel RDT" },
                { "{\"intelRdt\":{\"closID\":\"c\",\"l3CacheSchema\":\"L3:0=f\",\"enableMBM\":true}}", "Intel RDT" },
                /* device nodes */
                { "{\"deviceNodes\":[{\"path\":\"/dev/x\",\"type\":\"b\",\"permissions\":\"rwm\"}]}", NULL },
                { "{\"deviceNodes\":[{\"path\":\"dev/x\"}]}", "deviceNodes[0].path: 'dev/x' is not a normalised absolute path below /dev/" },
                { "{\"deviceNodes\":[{\"path\":\"/dev\"}]}", "deviceNodes[0].path: '/dev' is not" },
                { "{\"deviceNodes\":[{\"path\":\"/dev/\"}]}", "deviceNodes[0].path: '/dev/' is not" },
                { "{\"deviceNodes\":[{\"path\":\"/dev/../etc/shadow\"}]}", "'/dev/../etc/shadow' is not a normalised" },
                { "{\"deviceNodes\":[{\"path\":\"/dev//x\"}]}", "'/dev//x' is not" },
                { "{\"deviceNodes\":[{\"path\":\"/dev/./x\"}]}", "'/dev/./x' is not" },
                { "{\"deviceNodes\":[{\"path\":\"/dev/x/\"}]}", "'/dev/x/' is not" },
                { "{\"deviceNodes\":[{\"path\":\"/etc/x\"}]}", "'/etc/x' is not" },
                { "{\"deviceNodes\":[{\"path\":\"/dev/x\",\"hostPath\":\"/etc/shadow\"}]}",
                  "deviceNodes[0].hostPath: '/etc/shadow' is not a normalised absolute path below /dev/" },
                { "{\"deviceNodes\":[{\"path\":\"/dev/x\",\"hostPath\":\"dev/x\"}]}", "hostPath: 'dev/x' is not" },
                { "{\"deviceNodes\":[{\"path\":\"/dev/x\",\"type\":\"p\"}]}", "deviceNodes[0].type: a FIFO ('p')" },
                { "{\"deviceNodes\":[{\"path\":\"/dev/x\",\"type\":\"u\"}]}", "deviceNodes[0].type: 'u' is not a device type" },
                { "{\"deviceNodes\":[{\"path\":\"/dev/x\",\"permissions\":\"rwx\"}]}", "deviceNodes[0].permissions: only" },
                /* mounts */
                { "{\"mounts\":[{\"hostPath\":\"lib\",\"containerPath\":\"/opt/lib\"}]}",
                  "mounts[0].hostPath: 'lib' is not a normalised absolute path" },
                { "{\"mounts\":[{\"hostPath\":\"/lib/../etc\",\"containerPath\":\"/opt/lib\"}]}", "hostPath: '/lib/../etc' is not" },
                { "{\"mounts\":[{\"hostPath\":\"/opt/lib\",\"containerPath\":\"/opt/a/../b\"}]}",
                  "mounts[0].containerPath: '/opt/a/../b' is not a normalised absolute path" },
                { "{\"mounts\":[{\"hostPath\":\"/opt/lib\",\"containerPath\":\"opt/lib\"}]}", "containerPath: 'opt/lib' is not" },
                { "{\"mounts\":[{\"hostPath\":\"/opt/lib\",\"containerPath\":\"/opt/lib\",\"options\":[\"ro\",\"rw\"]}]}",
                  "mounts[0].options[1]: 'rw' (read-write): mounts are bound read-only in a sandbox" },
                { "{\"mounts\":[{\"hostPath\":\"/opt/lib\",\"containerPath\":\"/opt/lib\",\"options\":[\"suid\"]}]}",
                  "mounts[0].options[0]: 'suid' is not a mount option" },
                { "{\"mounts\":[{\"hostPath\":\"tmpfs\",\"containerPath\":\"/opt/t\",\"type\":\"tmpfs\"}]}",
                  "mounts[0].hostPath: 'tmpfs' is not" },
                { "{\"mounts\":[{\"hostPath\":\"/srv/t\",\"containerPath\":\"/opt/t\",\"type\":\"tmpfs\"}]}",
                  "mounts[0].type: 'tmpfs' mounts cannot be given to a sandbox (only bind mounts)" },
                { "{\"mounts\":[{\"hostPath\":\"/proc/1\",\"containerPath\":\"/proc/1\"}]}",
                  "mounts[0].containerPath: '/proc/1' cannot be bound in a sandbox" },
                { "{\"mounts\":[{\"hostPath\":\"/etc\",\"containerPath\":\"/\"}]}", "containerPath: '/' cannot be bound" },
                { "{\"mounts\":[{\"hostPath\":\"/srv/x\",\"containerPath\":\"/dev/x\"}]}", "containerPath: '/dev/x' cannot be bound" },
                { "{\"mounts\":[{\"hostPath\":\"/srv/x\",\"containerPath\":\"/workspace/x\"}]}", "'/workspace/x' cannot be bound" },
                { "{\"mounts\":[{\"hostPath\":\"/srv/passwd\",\"containerPath\":\"/etc/passwd\"}]}", "'/etc/passwd' cannot be bound" },
                { "{\"mounts\":[{\"hostPath\":\"/opt/lib/libx.so\",\"containerPath\":\"/usr/lib/libx.so\"}]}",
                  "'/usr/lib/libx.so' cannot be bound" },
                { "{\"mounts\":[{\"hostPath\":\"/usr/lib/libx.so\",\"containerPath\":\"/usr/lib/libx.so\"}]}", NULL },
                { "{\"mounts\":[{\"hostPath\":\"/lib/firmware/x\",\"containerPath\":\"/lib/firmware/x\"}]}", NULL },
                { "{\"mounts\":[{\"hostPath\":\"/run/x.sock\",\"containerPath\":\"/run/x.sock\",\"options\":[\"rbind\"]}]}", NULL },
                /* env */
                { "{\"env\":[\"EXAMPLE=a=b\",\"_X=\"]}", NULL },
                { "{\"env\":[\"LD_PRELOAD=/tmp/x.so\"]}", "env[0]: the variable 'LD_PRELOAD' may not be set in a sandbox" },
                { "{\"env\":[\"A=1\",\"LD_LIBRARY_PATH=/opt\"]}", "env[1]: the variable 'LD_LIBRARY_PATH' may not be set" },
                { "{\"env\":[\"PATH=/x\"]}", "the variable 'PATH' may not be set" },
                { "{\"env\":[\"HOME=/x\"]}", "the variable 'HOME' may not be set" },
                { "{\"env\":[\"1A=x\"]}", "the variable '1A' may not be set" },
                { "{\"env\":[\"NOVALUE\"]}", "env[0]: not NAME=VALUE" },
                /* hooks come first whatever else is wrong */
                { "{\"env\":[\"LD_PRELOAD=x\"],\"hooks\":[{\"hookName\":\"x\",\"path\":\"/x\"}]}", "containerEdits.hooks: hooks run" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *device_json = format(DEVICE_SPEC, cases[i].edits);
                _cleanup_free_ char *spec_json = format(SPEC_LEVEL_SPEC, cases[i].edits);
                _cleanup_free_ char *why = NULL;
                _cleanup_(cdi_registry_freep) CdiRegistry *reg = NULL;
                _cleanup_(cdi_edits_done) CdiEdits e = {};
                char *names[] = { (char *) "vendor.com/dev=d", NULL };
                CdiSpec *s = NULL;
                int r;

                /* Device level: the spec parses; resolving the device is refused with the reason. */
                reg = registry_of(device_json);
                r = cdi_registry_resolve(reg, names, &e, &why);
                if (cases[i].why ? (r != -EPERM || !why || !strstr(why, cases[i].why)) : r != 0)
                        fail_msg("case %zu (device): %d, '%s', wanted '%s'", i, r, why ?: "-", cases[i].why ?: "-");
                if (cases[i].why) {
                        const char *const *what, *const *reasons;

                        assert_null(e.nodes);
                        assert_null(e.env);
                        assert_int_equal(cdi_registry_refusals(reg, &what, &reasons), 1);
                        assert_string_equal(what[0], "vendor.com/dev=d");
                        assert_non_null(strstr(reasons[0], cases[i].why));
                        _cleanup_strv_free_ char **devices = cdi_registry_devices(reg);
                        assert_non_null(devices);
                        assert_strv(devices, (const char *const[]) { NULL });
                }

                /* Spec level: the whole spec is refused, with the same reason. */
                why = mfree(why);
                r = parse(spec_json, &s, &why);
                if (cases[i].why ? (r != -EBADMSG || !why || !strstr(why, cases[i].why)) : r != 0)
                        fail_msg("case %zu (spec): %d, '%s', wanted '%s'", i, r, why ?: "-", cases[i].why ?: "-");
                cdi_spec_free(s);
        }
}

/* A string of @n copies of @fmt with %zu the index, joined by ',' and wrapped in @head ... @tail. */
static char *repeat(const char *head, const char *fmt, size_t n, const char *tail) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        assert_non_null(f);
        fputs(head, f);
        for (size_t i = 0; i < n; i++) {
                if (i > 0)
                        fputc(',', f);
                fprintf(f, fmt, i);
        }
        fputs(tail, f);
        assert_int_equal(fclose(f), 0);
        return buf;
}

static void test_limits(void **state) {
        static const char spec_head[] = "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[";
        _cleanup_free_ char *devices_ok = repeat(spec_head, "{\"name\":\"d%zu\",\"containerEdits\":{}}", 1024, "]}");
        _cleanup_free_ char *devices_over = repeat(spec_head, "{\"name\":\"d%zu\",\"containerEdits\":{}}", 1025, "]}");
        _cleanup_free_ char *env_ok = repeat("{\"env\":[", "\"A%zu=1\"", 256, "]}");
        _cleanup_free_ char *env_over = repeat("{\"env\":[", "\"A%zu=1\"", 257, "]}");
        _cleanup_free_ char *nodes_over = repeat("{\"deviceNodes\":[", "{\"path\":\"/dev/x%zu\"}", 257, "]}");
        _cleanup_free_ char *mounts_over = repeat("{\"mounts\":[", "{\"hostPath\":\"/a%zu\",\"containerPath\":\"/opt/a\"}", 257, "]}");
        _cleanup_free_ char *long_value = NULL, *big = NULL;
        const struct {
                const char *json;
                bool spec_level;        /* the edits go at the spec level (DEVICE_SPEC otherwise) */
                const char *why;        /* NULL: accepted */
        } cases[] = {
                { devices_ok, false, NULL },
                { devices_over, false, "devices: more than 1024 entries" },
                { env_ok, true, NULL },
                { env_over, true, "containerEdits.env: more than 256 entries" },
                { nodes_over, false, "devices[0].containerEdits.deviceNodes: more than 256 entries" },
                { mounts_over, false, "devices[0].containerEdits.mounts: more than 256 entries" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *json = i < 2 ? strdup(cases[i].json) :
                        format(cases[i].spec_level ? SPEC_LEVEL_SPEC : DEVICE_SPEC, cases[i].json);
                _cleanup_free_ char *why = NULL;
                CdiSpec *s = NULL;
                int r = parse(json, &s, &why);

                if (cases[i].why ? (r != -EBADMSG || !strstr(why, cases[i].why)) : r != 0)
                        fail_msg("case %zu: %d, '%s'", i, r, why ?: "-");
                if (r == 0 && i == 0)
                        assert_int_equal(cdi_spec_n_devices(s), 1024);
                cdi_spec_free(s);
        }

        /* A string of 4096 bytes is fine, one of 4097 is not. */
        long_value = malloc(4097 + 1);
        assert_non_null(long_value);
        for (size_t n = 4096; n <= 4097; n++) {
                _cleanup_free_ char *edits = NULL, *json = NULL, *why = NULL;
                CdiSpec *s = NULL;

                memset(long_value, 'v', n);
                memcpy(long_value, "A=", 2);
                long_value[n] = '\0';
                assert_true(asprintf(&edits, "{\"env\":[\"%s\"]}", long_value) >= 0);
                json = format(DEVICE_SPEC, edits);
                if (n == 4096)
                        assert_int_equal(parse(json, &s, &why), 0);
                else {
                        assert_int_equal(parse(json, &s, &why), -EBADMSG);
                        assert_non_null(strstr(why, "devices[0].containerEdits.env[0]: longer than 4096 bytes"));
                }
                cdi_spec_free(s);
        }

        /* More than 1 MiB: refused before json-c sees it; so is a NUL byte. */
        big = malloc(CDI_SPEC_SIZE_MAX + 2);
        assert_non_null(big);
        memset(big, ' ', CDI_SPEC_SIZE_MAX + 1);
        big[0] = '{';
        big[CDI_SPEC_SIZE_MAX] = '}';
        big[CDI_SPEC_SIZE_MAX + 1] = '\0';
        {
                _cleanup_free_ char *why = NULL;
                CdiSpec *s = NULL;

                assert_int_equal(cdi_spec_parse(big, CDI_SPEC_SIZE_MAX + 1, NULL, &s, &why), -EBADMSG);
                assert_non_null(strstr(why, "larger than 1048576 bytes"));
                why = mfree(why);
                assert_int_equal(cdi_spec_parse(big, CDI_SPEC_SIZE_MAX, NULL, &s, &why), -EBADMSG);
                assert_non_null(strstr(why, "malformed JSON"));          /* not the size */
                why = mfree(why);
                assert_int_equal(cdi_spec_parse("{\"a\":1}\0", 8, NULL, &s, &why), -EBADMSG);
                assert_string_equal(why, "the spec holds a NUL byte");
                assert_null(s);
        }
}

static void test_device_names(void **state) {
        static const struct {
                const char *name;
                bool ok;
        } cases[] = {
                { "nvidia.com/gpu=0", true },
                { "nvidia.com/gpu=all", true },
                { "vendor.example.org/class_1.x-y=dev:1.a_b-c", true },
                { "a.b/c=d", true },
                { "nvidia.com/gpu", false },            /* no device */
                { "nvidia.com/gpu=", false },
                { "nvidia.com=0", false },              /* no class */
                { "nvidia/gpu=0", false },              /* a vendor without a dot */
                { "nvidia.com/=0", false },
                { "/gpu=0", false },
                { "nvidia.com/gpu/x=0", false },
                { "nvidia..com/gpu=0", false },
                { ".nvidia.com/gpu=0", false },
                { "nvidia.com./gpu=0", false },
                { "nvidia.-com/gpu=0", false },
                { "nvidia_x.com/gpu=0", false },
                { "nvidia.com/_gpu=0", false },
                { "nvidia.com/gpu=-0", false },
                { "nvidia.com/gpu=0=1", false },
                { "nvidia.com/gpu=0 ", false },
                { "nvidia.com/gpu=a/b", false },
                { "", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                if (cdi_device_name_valid(cases[i].name) != cases[i].ok)
                        fail_msg("'%s': wanted %s", cases[i].name, cases[i].ok ? "valid" : "invalid");
        assert_false(cdi_device_name_valid(NULL));
}

/* ---- the registry over a directory tree --------------------------------------------------------- */

static void write_at(const TestDir *d, const char *name, const char *text) {
        char path[256];
        FILE *f;

        (void) snprintf(path, sizeof(path), "%s/%s", d->path, name);
        f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fputs(text, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
}

#define DEV_SPEC(kind, name, node) \
        "{\"cdiVersion\":\"0.6.0\",\"kind\":\"" kind "\",\"devices\":[{\"name\":\"" name "\"," \
        "\"containerEdits\":{\"deviceNodes\":[{\"path\":\"" node "\"}]}}]}"

static void test_registry_dirs(void **state) {
        TestDir *d = *state;
        _cleanup_(cdi_registry_freep) CdiRegistry *reg = NULL;
        _cleanup_strv_free_ char **devices = NULL;
        _cleanup_(cdi_edits_done) CdiEdits e = {};
        _cleanup_free_ char *why = NULL;
        char etc[128], run[128], missing[128], link_target[256];
        char *dirs[] = { etc, missing, run, NULL };
        char *names[] = { (char *) "vendor.com/dev=x", (char *) "vendor.com/dev=y", NULL };
        char *conflict[] = { (char *) "vendor.com/dev=z", NULL };
        const char *const *what, *const *reasons;
        size_t n;

        (void) snprintf(etc, sizeof(etc), "%s/etc-cdi", d->path);
        (void) snprintf(run, sizeof(run), "%s/run-cdi", d->path);
        (void) snprintf(missing, sizeof(missing), "%s/missing", d->path);
        assert_int_equal(mkdir(etc, 0755), 0);
        assert_int_equal(mkdir(run, 0755), 0);

        /* /etc/cdi: x, y; z twice (a conflict); a refused device; YAML; broken JSON; others. */
        write_at(d, "etc-cdi/a.json", DEV_SPEC("vendor.com/dev", "x", "/dev/etc-x"));
        write_at(d, "etc-cdi/b.json", DEV_SPEC("vendor.com/dev", "y", "/dev/etc-y"));
        write_at(d, "etc-cdi/c.json", DEV_SPEC("vendor.com/dev", "z", "/dev/z1"));
        write_at(d, "etc-cdi/d.json", DEV_SPEC("vendor.com/dev", "z", "/dev/z2"));
        write_at(d, "etc-cdi/e.json", DEV_SPEC("vendor.com/dev", "bad", "/etc/passwd"));
        write_at(d, "etc-cdi/nvidia.yaml", "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n");
        write_at(d, "etc-cdi/broken.json", "{\"cdiVersion\":");
        write_at(d, "etc-cdi/README", "not a spec");
        assert_int_equal(mkdir(strcat(strcpy(link_target, etc), "/dir.json"), 0755), 0);
        assert_int_equal(mkfifo(strcat(strcpy(link_target, etc), "/fifo.json"), 0644), 0);
        /* /var/run/cdi: x again (it wins), and a symlinked spec (followed). */
        write_at(d, "run-cdi/a.json", DEV_SPEC("vendor.com/dev", "x", "/dev/run-x"));
        write_at(d, "other.json", DEV_SPEC("other.org/acc", "0", "/dev/acc0"));
        (void) snprintf(link_target, sizeof(link_target), "%s/other.json", d->path);
        {
                char link[256];

                (void) snprintf(link, sizeof(link), "%s/linked.json", run);
                assert_int_equal(symlink(link_target, link), 0);
        }

        assert_int_equal(cdi_registry_load(dirs, &reg), 0);
        devices = cdi_registry_devices(reg);
        assert_strv(devices, (const char *const[]) { "other.org/acc=0", "vendor.com/dev=x", "vendor.com/dev=y", NULL });

        n = cdi_registry_refusals(reg, &what, &reasons);
        assert_int_equal(n, 6);
        /* Files in the order read (sorted names), then devices by name. */
        assert_true(strstr(what[0], "/etc-cdi/broken.json") != NULL);
        assert_non_null(strstr(reasons[0], "malformed JSON"));
        assert_true(strstr(what[1], "/etc-cdi/dir.json") != NULL);
        assert_string_equal(reasons[1], "not a regular file");
        assert_true(strstr(what[2], "/etc-cdi/fifo.json") != NULL);
        assert_string_equal(reasons[2], "not a regular file");
        assert_true(strstr(what[3], "/etc-cdi/nvidia.yaml") != NULL);
        assert_string_equal(reasons[3], "YAML specs are not read: write the spec as JSON "
                            "(nvidia-ctk cdi generate --format=json)");
        assert_string_equal(what[4], "vendor.com/dev=bad");
        assert_non_null(strstr(reasons[4], "/etc-cdi/e.json: devices[0].containerEdits.deviceNodes[0].path: "
                               "'/etc/passwd' is not"));
        assert_string_equal(what[5], "vendor.com/dev=z");
        assert_non_null(strstr(reasons[5], "defined twice at the same precedence"));
        assert_non_null(strstr(reasons[5], "/etc-cdi/c.json"));
        assert_non_null(strstr(reasons[5], "/etc-cdi/d.json"));
        assert_null(what[6]);

        /* The later directory wins x. */
        assert_int_equal(cdi_registry_resolve(reg, names, &e, NULL), 0);
        assert_int_equal(e.n_nodes, 2);
        assert_string_equal(e.nodes[0].path, "/dev/etc-y");
        assert_string_equal(e.nodes[1].path, "/dev/run-x");
        assert_int_equal(cdi_registry_resolve(reg, conflict, &e, &why), -EPERM);
        assert_non_null(strstr(why, "defined twice"));
}

static void test_registry_empty(void **state) {
        TestDir *d = *state;
        _cleanup_(cdi_registry_freep) CdiRegistry *reg = NULL;
        _cleanup_strv_free_ char **devices = NULL;
        _cleanup_(cdi_edits_done) CdiEdits e = {};
        _cleanup_free_ char *why = NULL;
        char missing[128];
        char *dirs[] = { missing, NULL };
        char *names[] = { (char *) "vendor.com/dev=x", NULL };
        const char *const *what, *const *reasons;

        (void) snprintf(missing, sizeof(missing), "%s/none", d->path);
        assert_int_equal(cdi_registry_load(dirs, &reg), 0);
        devices = cdi_registry_devices(reg);
        assert_non_null(devices);
        assert_null(devices[0]);
        assert_int_equal(cdi_registry_refusals(reg, &what, &reasons), 0);
        assert_null(what[0]);
        assert_null(reasons[0]);
        assert_int_equal(cdi_registry_resolve(reg, names, &e, &why), -ENOENT);
        assert_string_equal(why, "unknown CDI device 'vendor.com/dev=x'");
}

/* ---- resolution, all or nothing ----------------------------------------------------------------- */

static void test_resolve_all_or_nothing(void **state) {
        static const char json[] =
                "{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":["
                "{\"name\":\"good\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/good\"}],\"env\":[\"GOOD=1\"]}},"
                "{\"name\":\"hooked\",\"containerEdits\":{\"hooks\":[{\"hookName\":\"x\",\"path\":\"/x\"}]}}]}";
        _cleanup_(cdi_registry_freep) CdiRegistry *reg = registry_of(json);
        static const struct {
                const char *a, *b;
                int r;
                const char *why;
        } cases[] = {
                { "vendor.com/dev=good", "vendor.com/dev=hooked", -EPERM,
                  "the CDI device 'vendor.com/dev=hooked' cannot be used in a sandbox: devices[1].containerEdits.hooks: hooks run" },
                { "vendor.com/dev=hooked", "vendor.com/dev=good", -EPERM, "'vendor.com/dev=hooked' cannot be used" },
                { "vendor.com/dev=good", "vendor.com/dev=nope", -ENOENT, "unknown CDI device 'vendor.com/dev=nope'" },
                { "vendor.com/dev=good", "other.com/dev=good", -ENOENT, "unknown CDI device 'other.com/dev=good'" },
                { "vendor.com/dev=good", "vendor.com/dev", -EBADMSG,
                  "'vendor.com/dev' is not a fully-qualified CDI device name" },
                { "vendor.com/dev=good", "x\ny", -EBADMSG, "'x\\x0ay' is not a fully-qualified" },
                { "vendor.com/dev=good", "vendor.com/dev=good", 0, NULL },
        };
        CdiEdits sentinel = { .n_nodes = 42 };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *why = NULL;
                char *names[] = { (char *) cases[i].a, (char *) cases[i].b, NULL };
                CdiEdits e = sentinel;
                int r = cdi_registry_resolve(reg, names, &e, &why);

                if (r != cases[i].r || (cases[i].why && (!why || !strstr(why, cases[i].why))))
                        fail_msg("case %zu: %d, '%s'", i, r, why ?: "-");
                if (r < 0) {
                        /* Nothing returned: the caller's struct is as it was. */
                        assert_int_equal(e.n_nodes, 42);
                        assert_null(e.nodes);
                        assert_null(e.env);
                        continue;
                }
                assert_int_equal(e.n_nodes, 1);         /* "good" twice: once */
                assert_string_equal(e.nodes[0].path, "/dev/good");
                assert_strv(e.env, (const char *const[]) { "GOOD=1", NULL });
                cdi_edits_done(&e);
                assert_int_equal(e.n_nodes, 0);
                assert_null(e.nodes);
        }
}

static void test_resolve_many(void **state) {
        _cleanup_free_ char *json = repeat("{\"cdiVersion\":\"0.6.0\",\"kind\":\"vendor.com/dev\",\"devices\":[",
                                           "{\"name\":\"d%zu\",\"containerEdits\":{}}", 65, "]}");
        _cleanup_(cdi_registry_freep) CdiRegistry *reg = registry_of(json);
        _cleanup_(cdi_edits_done) CdiEdits e = {};
        _cleanup_free_ char *why = NULL;
        char *names[66] = {};
        int r;

        for (size_t i = 0; i < 65; i++)
                assert_true(asprintf(&names[i], "vendor.com/dev=d%zu", i) >= 0);
        r = cdi_registry_resolve(reg, names, &e, &why);
        assert_int_equal(r, -E2BIG);
        assert_string_equal(why, "more than 64 CDI devices");
        free(names[64]);
        names[64] = NULL;
        assert_int_equal(cdi_registry_resolve(reg, names, &e, NULL), 0);
        assert_int_equal(e.n_nodes, 0);
        for (size_t i = 0; i < 64; i++)
                free(names[i]);
}

/* Precedence without files: the higher wins even when it is the refused one. */
static void test_precedence(void **state) {
        static const char good[] = DEV_SPEC("vendor.com/dev", "x", "/dev/good");
        static const char refused[] = DEV_SPEC("vendor.com/dev", "x", "/etc/bad");
        CdiSpec *specs[2] = {};
        unsigned prec[2] = { 0, 1 };
        _cleanup_(cdi_registry_freep) CdiRegistry *reg = NULL;
        _cleanup_strv_free_ char **devices = NULL;

        assert_int_equal(parse(good, &specs[0], NULL), 0);
        assert_int_equal(parse(refused, &specs[1], NULL), 0);
        assert_int_equal(cdi_registry_new_from_specs(specs, prec, 2, &reg), 0);
        assert_null(specs[0]);
        assert_null(specs[1]);
        devices = cdi_registry_devices(reg);
        assert_strv(devices, (const char *const[]) { NULL });
        assert_int_equal(cdi_registry_refusals(reg, NULL, NULL), 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_good_spec),
                cmocka_unit_test(test_spec_accessors),
                cmocka_unit_test(test_combined),
                cmocka_unit_test(test_nvidia_ctk),
                cmocka_unit_test(test_spec_refusals),
                cmocka_unit_test(test_edit_refusals),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_device_names),
                cmocka_unit_test_setup_teardown(test_registry_dirs, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_registry_empty, test_dir_setup, test_dir_teardown),
                cmocka_unit_test(test_resolve_all_or_nothing),
                cmocka_unit_test(test_resolve_many),
                cmocka_unit_test(test_precedence),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
