/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's configuration: embedded defaults, runner.conf and runner.conf.d/ drop-ins. */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "build-config.h"
#include "config/config.h"
#include "util/dialect.h"
#include "util/io-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/socket-util.h"
#include "util/string-table.h"
#include "util/strv.h"

#define CONFIG_FILE_MAX (1024 * 1024)
#define CONFIG_LINE_MAX 4096

static const char *const network_mode_table[_NETWORK_MODE_MAX] = {
        [NETWORK_MODE_NONE] = "none",
        [NETWORK_MODE_ALLOWLIST] = "allowlist",
};

DEFINE_STRING_TABLE_LOOKUP(network_mode, NetworkMode)

int config_init(Config *c) {
        *c = (Config) {
                .idle_exit_usec = 300 * USEC_PER_SEC,
                .log_level = LOG_INFO,
                .max_connections = 256,
                .max_connections_per_client = 32,
                .header_timeout_usec = 10 * USEC_PER_SEC,
                .request_timeout_usec = 120 * USEC_PER_SEC,
                .max_request_body_bytes = 16ULL << 20,
                .signature_max_skew_usec = 300 * USEC_PER_SEC,
                .allow_unscoped = false,
                .prebuilt = 2,
                .prebuilt_burst = 20,
                .prebuilt_burst_keep_usec = 600 * USEC_PER_SEC,
                .fleet_lease_ttl_usec = 10 * USEC_PER_SEC,
                .default_timeout_usec = 30 * USEC_PER_SEC,
                .max_timeout_usec = 3600 * USEC_PER_SEC,
                .memory_max = 2ULL << 30,
                .tasks_max = 256,
                .cpu_quota_percent = 100,
                .tmp_size = 256ULL << 20,
                .max_workspace_bytes = 10ULL << 30,
                .max_output_bytes = 1ULL << 30,
                .max_upload_file_bytes = 1ULL << 30,
                .max_upload_request_bytes = 10ULL << 30,
                .snapshot_retention = 100,
                .sd_export_retention_usec = 7 * 24 * 3600 * USEC_PER_SEC,
                .sd_max_exports = 1000,
                .sd_skill_retention_usec = 7 * 24 * 3600 * USEC_PER_SEC,
                .sd_max_skill_packages = 100,
                .network_mode = NETWORK_MODE_NONE,
                .network_open = true,
                .env_setup_timeout_usec = 1800 * USEC_PER_SEC,
                .npu_probe_timeout_usec = 10 * USEC_PER_SEC,
                .kernels_max = 16,
                .kernels_idle_timeout_usec = 3600 * USEC_PER_SEC,
                .kernels_max_lifetime_usec = 24 * 3600 * USEC_PER_SEC,
                .kernels_memory_max = 2ULL << 30,
                .kernels_tasks_max = 256,
                .kernels_cpu_quota_percent = 100,
                .kernels_max_message_bytes = 16ULL << 20,
                .kernels_max_output_bytes = 64ULL << 20,
        };

        c->bwrap = strdup(BWRAP_DEFAULT);
        c->sandbox_user = strdup(SERVICE_USER);
        if (!c->bwrap || !c->sandbox_user)
                return -ENOMEM;
        if (strv_extend(&c->env_bootstrap, "python-base") < 0)
                return -ENOMEM;
        c->npu_device_root = strdup("/dev");
        c->npu_driver_dir = strdup("/usr/local/Ascend/driver");
        c->npu_toolkit_dir = strdup("/usr/local/Ascend/ascend-toolkit/latest");
        c->npu_smi = strdup("/usr/local/sbin/npu-smi");
        if (!c->npu_device_root || !c->npu_driver_dir || !c->npu_toolkit_dir || !c->npu_smi)
                return -ENOMEM;
        if (strv_extend(&c->npu_cdi_dirs, "/etc/cdi") < 0 || strv_extend(&c->npu_cdi_dirs, "/var/run/cdi") < 0)
                return -ENOMEM;
        for (const char *const *p = (const char *const[]) { "numpy", "pandas", "scipy", "matplotlib", NULL }; *p; p++)
                if (strv_extend(&c->env_python_base_packages, *p) < 0)
                        return -ENOMEM;
        return strv_extend(&c->listen, "127.0.0.1:4311");
}

void config_done(Config *c) {
        c->listen = strv_free(c->listen);
        c->network_allow = strv_free(c->network_allow);
        c->network_mirrors = strv_free(c->network_mirrors);
        c->env_bootstrap = strv_free(c->env_bootstrap);
        c->env_python_base_packages = strv_free(c->env_python_base_packages);
        free(c->env_python_base);
        c->env_channels = strv_free(c->env_channels);
        c->env_mirrors = strv_free(c->env_mirrors);
        free(c->env_index_ca);
        free(c->env_preset);
        free(c->env_index_url);
        free(c->env_wheelhouse);
        free(c->env_micromamba);
        free(c->env_micromamba_sha256);
        free(c->npu_device_root);
        free(c->npu_driver_dir);
        free(c->npu_toolkit_dir);
        free(c->npu_smi);
        free(c->npu_dcmi_library);
        c->npu_cdi_dirs = strv_free(c->npu_cdi_dirs);
        free(c->npu_workloads_file);
        free(c->npu_repo_dir);
        free(c->token_file);
        free(c->signing_key_file);
        free(c->bwrap);
        free(c->sandbox_user);
        free(c->fleet_node_id);
        free(c->fleet_advertise_url);
        c->fleet_etcd = strv_free(c->fleet_etcd);
        free(c->fleet_etcd_prefix);
        free(c->fleet_etcd_ca);
        free(c->fleet_etcd_cert);
        free(c->fleet_etcd_key);
        *c = (Config) {};
}

/* ---- value parsers ------------------------------------------------------------------------- */

static int parse_u64_prefix(const char *s, uint64_t *ret, const char **ret_end) {
        uint64_t v = 0;
        const char *p = s;

        if (!isdigit((unsigned char) *p))
                return -EINVAL;
        for (; isdigit((unsigned char) *p); p++) {
                unsigned d = (unsigned) (*p - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret = v;
        *ret_end = p;
        return 0;
}

int config_parse_bytes(const char *s, uint64_t *ret) {
        static const struct { const char *suffix; unsigned shift; } suffixes[] = {
                { "", 0 }, { "B", 0 }, { "K", 10 }, { "M", 20 }, { "G", 30 }, { "T", 40 },
                { "KiB", 10 }, { "MiB", 20 }, { "GiB", 30 }, { "TiB", 40 },
        };
        const char *end;
        uint64_t v;
        int r;

        if (isempty(s))
                return -EINVAL;
        if (streq(s, "infinity")) {
                *ret = 0;
                return 0;
        }
        r = parse_u64_prefix(s, &v, &end);
        if (r < 0)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++)
                if (streq(end, suffixes[i].suffix)) {
                        if (suffixes[i].shift > 0 && v > (UINT64_MAX >> suffixes[i].shift))
                                return -EINVAL;
                        *ret = v << suffixes[i].shift;
                        return 0;
                }
        return -EINVAL;
}

int config_parse_seconds(const char *s, uint64_t *ret_usec) {
        static const struct { const char *suffix; uint64_t usec; } suffixes[] = {
                { "", USEC_PER_SEC }, { "s", USEC_PER_SEC }, { "sec", USEC_PER_SEC },
                { "ms", USEC_PER_MSEC }, { "min", 60 * USEC_PER_SEC }, { "m", 60 * USEC_PER_SEC },
                { "h", 3600 * USEC_PER_SEC },
        };
        const char *end;
        uint64_t v;
        int r;

        if (isempty(s))
                return -EINVAL;
        r = parse_u64_prefix(s, &v, &end);
        if (r < 0)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++)
                if (streq(end, suffixes[i].suffix)) {
                        if (v > UINT64_MAX / suffixes[i].usec)
                                return -EINVAL;
                        *ret_usec = v * suffixes[i].usec;
                        return 0;
                }
        return -EINVAL;
}

int config_parse_bool(const char *s, bool *ret) {
        static const char *const yes[] = { "1", "yes", "y", "true", "t", "on" };
        static const char *const no[] = { "0", "no", "n", "false", "f", "off" };

        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        return -EINVAL;
}

/* ---- the key table ------------------------------------------------------------------------- */

typedef int (*ConfigParser)(const char *value, void *field, char **ret_why);

static int why(char **ret_why, const char *s) {
        *ret_why = strdup(s);
        return *ret_why ? -EINVAL : -ENOMEM;
}

static int cp_bytes(const char *v, void *f, char **ret_why) {
        if (config_parse_bytes(v, f) < 0)
                return why(ret_why, "expected a size in bytes, optionally with K, M, G or T (1024-based)");
        return 0;
}

static int cp_seconds(const char *v, void *f, char **ret_why) {
        if (config_parse_seconds(v, f) < 0)
                return why(ret_why, "expected a time span such as 30, 30s, 500ms, 5min or 1h");
        return 0;
}

static int cp_bool(const char *v, void *f, char **ret_why) {
        if (config_parse_bool(v, f) < 0)
                return why(ret_why, "expected a boolean (yes/no)");
        return 0;
}

static int cp_unsigned(const char *v, void *f, char **ret_why) {
        const char *end;
        uint64_t u;

        if (parse_u64_prefix(v, &u, &end) < 0 || *end || u > 1000000)
                return why(ret_why, "expected an integer between 0 and 1000000");
        *(unsigned *) f = (unsigned) u;
        return 0;
}

static int cp_u64(const char *v, void *f, char **ret_why) {
        const char *end;
        uint64_t u;

        if (streq(v, "infinity")) {
                *(uint64_t *) f = 0;
                return 0;
        }
        if (parse_u64_prefix(v, &u, &end) < 0 || *end)
                return why(ret_why, "expected a non-negative integer or 'infinity'");
        *(uint64_t *) f = u;
        return 0;
}

static int cp_percent(const char *v, void *f, char **ret_why) {
        const char *end;
        uint64_t u;

        if (parse_u64_prefix(v, &u, &end) < 0 || !streq(end, "%") || u > 100000)
                return why(ret_why, "expected a percentage such as 100% (0% = no limit)");
        *(unsigned *) f = (unsigned) u;
        return 0;
}

static int cp_path(const char *v, void *f, char **ret_why) {
        char **p = f;
        char *t;

        if (isempty(v)) {
                free(*p);
                *p = NULL;
                return 0;
        }
        if (v[0] != '/')
                return why(ret_why, "expected an absolute path");
        t = strdup(v);
        if (!t)
                return -ENOMEM;
        free(*p);
        *p = t;
        return 0;
}

/* A user name (or a numeric uid); empty: the service user again. */
static int cp_user(const char *v, void *f, char **ret_why) {
        char **p = f, *t;

        if (strlen(v) > 64 || strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != strlen(v) ||
            v[0] == '-')
                return why(ret_why, "expected a user name or a numeric uid");
        t = strdup(isempty(v) ? SERVICE_USER : v);
        if (!t)
                return -ENOMEM;
        free(*p);
        *p = t;
        return 0;
}

static int cp_log_level(const char *v, void *f, char **ret_why) {
        int l = log_level_from_string(v);

        if (l < 0)
                return why(ret_why, "expected one of debug, info, notice, warning, err, crit, alert, emerg");
        *(int *) f = l;
        return 0;
}

static int cp_listen(const char *v, void *f, char **ret_why) {
        char ***l = f;
        const char *address;
        ListenAddress a;

        /* systemd semantics: an empty assignment resets the list. */
        if (isempty(v)) {
                *l = strv_free(*l);
                return 0;
        }
        /* An optional "sciencediscovery=" (or "api=") prefix picks the listener's API dialect. */
        (void) http_dialect_split_listen(v, &address);
        if (listen_address_parse(address, &a) < 0)
                return why(ret_why, "expected [DIALECT=]IPV4:PORT, [IPV6]:PORT or an absolute socket path");
        return strv_extend(l, v);
}

static int cp_strv(const char *v, void *f, char **ret_why) {
        char ***l = f;
        _cleanup_free_ char *copy = NULL;
        char *save = NULL;

        if (isempty(v)) {
                *l = strv_free(*l);
                return 0;
        }
        copy = strdup(v);
        if (!copy)
                return -ENOMEM;
        for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                int r = strv_extend(l, w);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int cp_network_mode(const char *v, void *f, char **ret_why) {
        NetworkMode m = network_mode_from_string(v);

        if (m < 0)
                return why(ret_why, "expected 'none' or 'allowlist'");
        *(NetworkMode *) f = m;
        return 0;
}

/* A single word of printable ASCII (a preset name, a URL, a hash): checked further where used. */
static int cp_word(const char *v, void *f, char **ret_why) {
        char **p = f, *t;

        if (isempty(v)) {
                *p = mfree(*p);
                return 0;
        }
        for (const char *c = v; *c; c++)
                if (*c <= ' ' || *c >= 127)
                        return why(ret_why, "expected one word of printable ASCII");
        t = strdup(v);
        if (!t)
                return -ENOMEM;
        free(*p);
        *p = t;
        return 0;
}

typedef struct ConfigKey {
        const char *section;
        const char *key;
        ConfigParser parse;
        size_t offset;
} ConfigKey;

#define K(s, k, p, field) { s, k, p, offsetof(Config, field) }
static const ConfigKey config_keys[] = {
        K("Runner", "Listen", cp_listen, listen),
        K("Runner", "IdleExitSec", cp_seconds, idle_exit_usec),
        K("Runner", "LogLevel", cp_log_level, log_level),
        K("Runner", "MaxConnections", cp_unsigned, max_connections),
        K("Runner", "MaxConnectionsPerClient", cp_unsigned, max_connections_per_client),
        K("Runner", "HeaderTimeoutSec", cp_seconds, header_timeout_usec),
        K("Runner", "RequestTimeoutSec", cp_seconds, request_timeout_usec),
        K("Runner", "MaxRequestBodyBytes", cp_bytes, max_request_body_bytes),
        K("Auth", "TokenFile", cp_path, token_file),
        K("Auth", "SigningKeyFile", cp_path, signing_key_file),
        K("Auth", "SignatureMaxSkewSec", cp_seconds, signature_max_skew_usec),
        K("Execution", "Bwrap", cp_path, bwrap),
        K("Execution", "SandboxUser", cp_user, sandbox_user),
        K("Execution", "AllowUnscoped", cp_bool, allow_unscoped),
        K("Execution", "DefaultTimeoutSec", cp_seconds, default_timeout_usec),
        K("Execution", "MaxTimeoutSec", cp_seconds, max_timeout_usec),
        K("Execution", "MemoryMax", cp_bytes, memory_max),
        K("Execution", "TasksMax", cp_u64, tasks_max),
        K("Execution", "CPUQuota", cp_percent, cpu_quota_percent),
        K("Execution", "TmpSize", cp_bytes, tmp_size),
        K("Execution", "Prebuilt", cp_unsigned, prebuilt),
        K("Execution", "PrebuiltBurst", cp_unsigned, prebuilt_burst),
        K("Execution", "PrebuiltBurstKeepSec", cp_seconds, prebuilt_burst_keep_usec),
        K("Quota", "MaxWorkspaceBytes", cp_bytes, max_workspace_bytes),
        K("Quota", "MaxOutputBytes", cp_bytes, max_output_bytes),
        K("Quota", "MaxUploadFileBytes", cp_bytes, max_upload_file_bytes),
        K("Quota", "MaxUploadRequestBytes", cp_bytes, max_upload_request_bytes),
        K("Quota", "SnapshotRetention", cp_unsigned, snapshot_retention),
        K("ScienceDiscovery", "ExportRetentionSec", cp_seconds, sd_export_retention_usec),
        K("ScienceDiscovery", "MaxExports", cp_unsigned, sd_max_exports),
        K("ScienceDiscovery", "SkillPackageRetentionSec", cp_seconds, sd_skill_retention_usec),
        K("ScienceDiscovery", "MaxSkillPackages", cp_unsigned, sd_max_skill_packages),
        K("Network", "Mode", cp_network_mode, network_mode),
        K("Network", "Allow", cp_strv, network_allow),
        K("Network", "Mirrors", cp_strv, network_mirrors),
        K("Network", "OpenMode", cp_bool, network_open),
        K("Environments", "Bootstrap", cp_strv, env_bootstrap),
        K("Environments", "Offline", cp_bool, env_offline),
        K("Environments", "PythonBase", cp_word, env_python_base),
        K("Environments", "PythonBasePackages", cp_strv, env_python_base_packages),
        K("Environments", "Preset", cp_word, env_preset),
        K("Environments", "IndexURL", cp_word, env_index_url),
        K("Environments", "Wheelhouse", cp_path, env_wheelhouse),
        K("Environments", "Channels", cp_strv, env_channels),
        K("Environments", "Mirrors", cp_strv, env_mirrors),
        K("Environments", "IndexCA", cp_path, env_index_ca),
        K("Environments", "Micromamba", cp_path, env_micromamba),
        K("Environments", "MicromambaSHA256", cp_word, env_micromamba_sha256),
        K("Environments", "SetupTimeoutSec", cp_seconds, env_setup_timeout_usec),
        K("NPU", "Enable", cp_bool, npu_enable),
        K("NPU", "DeviceRoot", cp_path, npu_device_root),
        K("NPU", "DriverDirectory", cp_path, npu_driver_dir),
        K("NPU", "ToolkitDirectory", cp_path, npu_toolkit_dir),
        K("NPU", "NpuSmi", cp_path, npu_smi),
        K("NPU", "DcmiLibrary", cp_path, npu_dcmi_library),
        K("NPU", "ProbeTimeoutSec", cp_seconds, npu_probe_timeout_usec),
        K("NPU", "CDISpecDirectories", cp_strv, npu_cdi_dirs),
        K("NPU", "Broker", cp_bool, npu_broker),
        K("NPU", "WorkloadsFile", cp_path, npu_workloads_file),
        K("NPU", "RepositoryDirectory", cp_path, npu_repo_dir),
        K("Fleet", "Enable", cp_bool, fleet_enable),
        K("Fleet", "NodeId", cp_word, fleet_node_id),
        K("Fleet", "AdvertiseURL", cp_word, fleet_advertise_url),
        K("Fleet", "Etcd", cp_strv, fleet_etcd),
        K("Fleet", "EtcdPrefix", cp_word, fleet_etcd_prefix),
        K("Fleet", "EtcdCAFile", cp_path, fleet_etcd_ca),
        K("Fleet", "EtcdCertFile", cp_path, fleet_etcd_cert),
        K("Fleet", "EtcdKeyFile", cp_path, fleet_etcd_key),
        K("Fleet", "LeaseTTLSec", cp_seconds, fleet_lease_ttl_usec),
        K("Kernels", "Enable", cp_bool, kernels_enable),
        K("Kernels", "MaxKernels", cp_unsigned, kernels_max),
        K("Kernels", "IdleTimeoutSec", cp_seconds, kernels_idle_timeout_usec),
        K("Kernels", "MaxLifetimeSec", cp_seconds, kernels_max_lifetime_usec),
        K("Kernels", "Prespawn", cp_unsigned, kernels_prespawn),
        K("Kernels", "MemoryMax", cp_bytes, kernels_memory_max),
        K("Kernels", "TasksMax", cp_u64, kernels_tasks_max),
        K("Kernels", "CPUQuota", cp_percent, kernels_cpu_quota_percent),
        K("Kernels", "MaxMessageBytes", cp_bytes, kernels_max_message_bytes),
        K("Kernels", "MaxOutputBytes", cp_bytes, kernels_max_output_bytes),
};
#undef K

static bool section_known(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++)
                if (streq(config_keys[i].section, s))
                        return true;
        return false;
}

static int fail(char **ret_error, const char *filename, unsigned line, const char *fmt, ...) _printf_(4, 5);
static int fail(char **ret_error, const char *filename, unsigned line, const char *fmt, ...) {
        _cleanup_free_ char *what = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&what, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        if (ret_error && asprintf(ret_error, "%s:%u: %s", filename, line, what) < 0)
                return -ENOMEM;
        return -EINVAL;
}

static char *strip(char *s) {
        char *e;

        while (*s == ' ' || *s == '\t')
                s++;
        e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                *--e = '\0';
        return s;
}

int config_parse_buffer(Config *c, const char *filename, const char *data, size_t size, char **ret_error) {
        _cleanup_free_ char *section = NULL;
        unsigned line_no = 0;
        size_t pos = 0;
        int r;

        if (size > CONFIG_FILE_MAX)
                return fail(ret_error, filename, 0, "file is larger than %u bytes", CONFIG_FILE_MAX);

        while (pos < size) {
                const char *nl = memchr(data + pos, '\n', size - pos);
                size_t len = nl ? (size_t) (nl - (data + pos)) : size - pos;
                char buf[CONFIG_LINE_MAX + 1], *l, *eq, *key, *value;
                _cleanup_free_ char *why_text = NULL;
                const ConfigKey *k = NULL;

                line_no++;
                if (len > CONFIG_LINE_MAX)
                        return fail(ret_error, filename, line_no, "line longer than %u bytes", CONFIG_LINE_MAX);
                if (memchr(data + pos, '\0', len))
                        return fail(ret_error, filename, line_no, "NUL byte in line");
                memcpy(buf, data + pos, len);
                buf[len] = '\0';
                pos += len + (nl ? 1 : 0);

                l = strip(buf);
                if (l[0] == '\0' || l[0] == '#' || l[0] == ';')
                        continue;

                if (l[0] == '[') {
                        size_t n = strlen(l);

                        if (n < 3 || l[n - 1] != ']')
                                return fail(ret_error, filename, line_no, "malformed section header '%s'", l);
                        l[n - 1] = '\0';
                        if (!section_known(l + 1))
                                return fail(ret_error, filename, line_no,
                                            "unknown section [%s] (known: Runner, Auth, Execution, Quota, Network, Environments, NPU, Kernels)",
                                            l + 1);
                        free(section);
                        section = strdup(l + 1);
                        if (!section)
                                return -ENOMEM;
                        continue;
                }

                eq = strchr(l, '=');
                if (!eq)
                        return fail(ret_error, filename, line_no, "expected KEY=VALUE, got '%s'", l);
                *eq = '\0';
                key = strip(l);
                value = strip(eq + 1);
                if (!section)
                        return fail(ret_error, filename, line_no, "assignment '%s=' outside of any section", key);

                for (size_t i = 0; i < ELEMENTSOF(config_keys); i++)
                        if (streq(config_keys[i].section, section) && streq(config_keys[i].key, key)) {
                                k = &config_keys[i];
                                break;
                        }
                if (!k)
                        return fail(ret_error, filename, line_no, "unknown key '%s' in section [%s]", key, section);

                r = k->parse(value, (uint8_t *) c + k->offset, &why_text);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return fail(ret_error, filename, line_no, "invalid value '%s' for %s=: %s",
                                    value, key, why_text ?: "invalid");
        }
        return 0;
}


static int apply_file(Config *c, const char *path, bool required, char **ret_error) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = read_file_limited(AT_FDCWD, path, O_NOCTTY, CONFIG_FILE_MAX, 0, &data, &size);
        if (r == -ENOENT && !required)
                return 0;
        if (r == -EBADFD) {
                struct stat st;
                /* systemd convention: a drop-in linked to /dev/null is masked. */
                if (stat(path, &st) == 0 && S_ISCHR(st.st_mode))
                        return 0;
                if (ret_error && asprintf(ret_error, "%s: not a regular file", path) < 0)
                        return -ENOMEM;
                return -EINVAL;
        }
        if (r < 0) {
                if (ret_error && asprintf(ret_error, "%s: %s", path, strerror(-r)) < 0)
                        return -ENOMEM;
                return r;
        }
        return config_parse_buffer(c, path, data, size, ret_error);
}

int config_verify(Config *c, char **ret_error) {
        const char *what = NULL;

        if (!c->bwrap) {
                c->bwrap = strdup(BWRAP_DEFAULT);
                if (!c->bwrap)
                        return -ENOMEM;
        }
        if (c->max_connections < 1)
                what = "[Runner] MaxConnections= must be at least 1";
        else if (c->max_request_body_bytes < 1024)
                what = "[Runner] MaxRequestBodyBytes= must be at least 1K";
        else if (c->header_timeout_usec < USEC_PER_SEC)
                what = "[Runner] HeaderTimeoutSec= must be at least 1s";
        else if (c->request_timeout_usec < USEC_PER_SEC)
                what = "[Runner] RequestTimeoutSec= must be at least 1s";
        else if (c->default_timeout_usec < USEC_PER_MSEC || c->max_timeout_usec < USEC_PER_MSEC)
                what = "[Execution] DefaultTimeoutSec= and MaxTimeoutSec= must be at least 1ms";
        else if (c->default_timeout_usec > c->max_timeout_usec)
                what = "[Execution] DefaultTimeoutSec= must not exceed MaxTimeoutSec=";
        else if (c->memory_max != 0 && c->memory_max < (1ULL << 20))
                what = "[Execution] MemoryMax= must be at least 1M (or 0 for no limit)";
        else if (c->env_python_base && !streq(c->env_python_base, "debian") &&
                 !streq(c->env_python_base, "wheelhouse") && !streq(c->env_python_base, "index"))
                what = "[Environments] PythonBase= must be debian, wheelhouse or index";
        else if (c->env_python_base && streq(c->env_python_base, "wheelhouse") && !c->env_wheelhouse)
                what = "[Environments] PythonBase=wheelhouse needs Wheelhouse=";
        else if (c->env_python_base && !streq(c->env_python_base, "debian") && !c->env_python_base_packages)
                what = "[Environments] PythonBase= from a wheelhouse or an index needs PythonBasePackages=";
        else if (c->env_setup_timeout_usec < USEC_PER_SEC)
                what = "[Environments] SetupTimeoutSec= must be at least 1s";
        else if (!c->env_micromamba != !c->env_micromamba_sha256)
                what = "[Environments] Micromamba= and MicromambaSHA256= must be set together";
        else if (c->npu_probe_timeout_usec < USEC_PER_SEC)
                what = "[NPU] ProbeTimeoutSec= must be at least 1s";
        else if (c->npu_broker && (!c->npu_workloads_file || !c->npu_repo_dir))
                what = "[NPU] Broker=yes needs WorkloadsFile= and RepositoryDirectory=";
        else if (c->npu_broker && !c->npu_enable)
                what = "[NPU] Broker=yes needs Enable=yes (the jobs' chips are probed and held as executions' are)";
        else if (c->kernels_memory_max != 0 && c->kernels_memory_max < (16ULL << 20))
                what = "[Kernels] MemoryMax= must be at least 16M (or 0 for no limit)";
        else if (c->kernels_max_message_bytes < 64 * 1024)
                what = "[Kernels] MaxMessageBytes= must be at least 64K";
        else if (c->kernels_idle_timeout_usec != 0 && c->kernels_idle_timeout_usec < USEC_PER_SEC)
                what = "[Kernels] IdleTimeoutSec= must be at least 1s (or 0 for never)";
        else if (c->kernels_max_lifetime_usec != 0 && c->kernels_max_lifetime_usec < USEC_PER_SEC)
                what = "[Kernels] MaxLifetimeSec= must be at least 1s (or 0 for never)";
        else if (c->fleet_enable && strv_length(c->fleet_etcd) == 0)
                what = "[Fleet] Enable=yes needs Etcd= (etcd's client URLs)";
        else if (c->fleet_enable && !c->fleet_advertise_url)
                what = "[Fleet] Enable=yes needs AdvertiseURL= (where the other nodes reach this one)";
        else if (c->fleet_lease_ttl_usec < 2 * USEC_PER_SEC)
                what = "[Fleet] LeaseTTLSec= must be at least 2s";
        else if (!c->fleet_etcd_cert != !c->fleet_etcd_key)
                what = "[Fleet] EtcdCertFile= and EtcdKeyFile= must be set together";
        if (!what)
                return 0;
        if (ret_error && !(*ret_error = strdup(what)))
                return -ENOMEM;
        return -EINVAL;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int config_load(Config *c, const char *path, bool required, char **ret_error) {
        _cleanup_strv_free_ char **dropins = NULL;
        _cleanup_free_ char *dir = NULL;
        DIR *d;
        int r;

        r = apply_file(c, path, required, ret_error);
        if (r < 0)
                return r;

        if (asprintf(&dir, "%s.d", path) < 0)
                return -ENOMEM;
        d = opendir(dir);
        if (!d) {
                if (errno == ENOENT)
                        return 0;
                r = negative_errno();
                if (ret_error && asprintf(ret_error, "%s: %s", dir, strerror(-r)) < 0)
                        return -ENOMEM;
                return r == -ENOTDIR ? -EINVAL : r;
        }
        for (struct dirent *de; (de = readdir(d)); ) {
                size_t l = strlen(de->d_name);
                char *p;

                if (de->d_name[0] == '.' || l < 6 || !streq(de->d_name + l - 5, ".conf"))
                        continue;
                if (asprintf(&p, "%s/%s", dir, de->d_name) < 0) {
                        closedir(d);
                        return -ENOMEM;
                }
                r = strv_consume(&dropins, p);
                if (r < 0) {
                        closedir(d);
                        return r;
                }
        }
        closedir(d);

        if (dropins)
                qsort(dropins, strv_length(dropins), sizeof(char *), cmp_str);
        for (char **p = dropins; p && *p; p++) {
                r = apply_file(c, *p, true, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}
