/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's configuration: embedded defaults, runner.conf and runner.conf.d/ drop-ins. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum NetworkMode {
        NETWORK_MODE_NONE,
        NETWORK_MODE_ALLOWLIST,
        _NETWORK_MODE_MAX,
        _NETWORK_MODE_INVALID = -22,
} NetworkMode;

typedef struct Config {
        /* [Runner] */
        char **listen;                  /* NULL-terminated; used only without socket activation */
        uint64_t idle_exit_usec;        /* 0 = never */
        int log_level;
        unsigned max_connections;
        unsigned max_connections_per_client;
        uint64_t header_timeout_usec;
        uint64_t request_timeout_usec;
        uint64_t max_request_body_bytes;

        /* [Auth] */
        char *token_file;
        char *signing_key_file;
        uint64_t signature_max_skew_usec;

        /* [Execution] */
        char *bwrap;
        char *sandbox_user;             /* started as root: the user everything runs as */
        bool allow_unscoped;
        uint64_t default_timeout_usec;
        uint64_t max_timeout_usec;
        uint64_t memory_max;            /* bytes, 0 = no limit */
        uint64_t tasks_max;             /* 0 = no limit */
        unsigned cpu_quota_percent;     /* 0 = no limit */
        uint64_t tmp_size;
        unsigned prebuilt;              /* sandboxes built ahead per shape in use, 0 = none */
        unsigned prebuilt_burst;        /* up to this many per shape after a burst of its runs (0: Prebuilt=) */
        uint64_t prebuilt_burst_keep_usec; /* a grown pool goes back to Prebuilt= after this without a burst */

        /* [Quota]: 0 = unlimited */
        uint64_t max_workspace_bytes;
        uint64_t max_output_bytes;
        uint64_t max_upload_file_bytes;
        uint64_t max_upload_request_bytes;
        unsigned snapshot_retention;    /* snapshots kept per workspace, 0 = all */

        /* [ScienceDiscovery]: their snapshot exports and skill packages; 0 = no such bound */
        uint64_t sd_export_retention_usec;      /* exports older than this are deleted */
        unsigned sd_max_exports;                /* ... and the oldest beyond this many */
        uint64_t sd_skill_retention_usec;       /* packages unused for this long are deleted */
        unsigned sd_max_skill_packages;         /* ... and the least recently used beyond this many */

        /* [Network] */
        NetworkMode network_mode;
        char **network_allow;
        char **network_mirrors;
        bool network_open;              /* OpenMode=: the ScienceDiscovery dialect serves network mode open */

        /* [Environments] (DESIGN.md §14) */
        char **env_bootstrap;           /* base environments built after start-up ("python-base") */
        char *env_python_base;          /* python-base from "debian" (NULL), "wheelhouse" or "index" */
        char **env_python_base_packages;/* ... its packages then */
        bool env_offline;               /* setups get no network: wheelhouses and Debian's packages only */
        char *env_preset;               /* the global index preset (NULL: upstream) */
        char *env_index_url;            /* an explicit global index, instead of the preset */
        char *env_wheelhouse;           /* a local wheel directory (pip --find-links) */
        char **env_channels;            /* conda channels allowed */
        char **env_mirrors;             /* address ranges the provisioning gateway may reach */
        char *env_index_ca;             /* a CA bundle for the index (pip --cert) */
        char *env_micromamba;           /* conda: the micromamba binary ... */
        char *env_micromamba_sha256;    /* ... and its SHA-256, checked before every use */
        uint64_t env_setup_timeout_usec;

        /* [NPU] (DESIGN.md §9) */
        bool npu_enable;                /* chips in sandboxes */
        char *npu_device_root;          /* where davinciN and the management nodes are ("/dev") */
        char *npu_driver_dir;           /* the driver tree, read-only in NPU sandboxes */
        char *npu_toolkit_dir;          /* the CANN toolkit (absent: none) */
        char *npu_smi;                  /* npu-smi: chip state, and each chip's probe */
        char *npu_dcmi_library;         /* libdcmi.so (NULL: the driver's, when present) */
        uint64_t npu_probe_timeout_usec;
        char **npu_cdi_dirs;            /* CDI spec directories, later ones take precedence */
        bool npu_broker;                /* the host NPU broker (allowlisted jobs) */
        char *npu_workloads_file;       /* its allowlist */
        char *npu_repo_dir;             /* the deployment checkout ${repo:...} resolves under */

        /* [Kernels] (issue 22, docs/kernels.md): stateful Jupyter kernels, each in a sandbox */
        bool kernels_enable;            /* off unless enabled */
        unsigned kernels_max;           /* kernels at once, counted at request time; 0 = no cap */
        uint64_t kernels_idle_timeout_usec;  /* culled after this long idle, 0 = never */
        uint64_t kernels_max_lifetime_usec;  /* ended after this long, 0 = never */
        unsigned kernels_prespawn;      /* kernels kept started ahead (parsed; not used yet) */
        uint64_t kernels_memory_max;    /* per kernel, 0 = no limit */
        uint64_t kernels_tasks_max;     /* per kernel, 0 = no limit */
        unsigned kernels_cpu_quota_percent;  /* per kernel, 0 = no limit */
        uint64_t kernels_max_message_bytes;  /* one inbound WebSocket message */
        uint64_t kernels_max_output_bytes;   /* one execution's iopub output, then a marker; 0 = no budget */

        /* [Fleet] (issue 24, docs/fleet.md): membership of a fleet of runners in etcd */
        bool fleet_enable;              /* off: a single node, as without this section */
        char *fleet_node_id;            /* NULL: the host name */
        char *fleet_advertise_url;      /* where the other nodes reach this one */
        char **fleet_etcd;              /* etcd's client URLs */
        char *fleet_etcd_prefix;        /* NULL: FLEET_ETCD_PREFIX_DEFAULT */
        char *fleet_etcd_ca, *fleet_etcd_cert, *fleet_etcd_key;
        uint64_t fleet_lease_ttl_usec;
} Config;

#define FLEET_ETCD_PREFIX_DEFAULT "/sandbox-runner/"

/* config_init() - fill in the embedded defaults. Return: 0 or -ENOMEM. */
int config_init(Config *c);
void config_done(Config *c);

/*
 * config_parse_buffer() - apply one systemd-style INI file held in memory (pure: no I/O).
 * On a bad line, *ret_error is set to "FILE:LINE: what is wrong" (caller frees).
 * Return: 0, -EINVAL on a bad line, -ENOMEM.
 */
int config_parse_buffer(Config *c, const char *filename, const char *data, size_t size, char **ret_error);

/*
 * config_load() - apply @path (the main file; a missing one is fine unless @required) and then
 * every "*.conf" in "@path.d/" in lexical order. Return: 0, -EINVAL (with *ret_error),
 * -ENOENT (required file missing, with *ret_error), other -errno from reading files.
 */
int config_load(Config *c, const char *path, bool required, char **ret_error);

/*
 * config_verify() - checks across keys after all files are applied (minimums, ordering), and
 * defaults restored by empty assignments. Return: 0, -EINVAL with *ret_error, -ENOMEM.
 */
int config_verify(Config *c, char **ret_error);

/* Validators shared with the command line and the API. Return: 0 or -EINVAL. */
int config_parse_bytes(const char *s, uint64_t *ret);
int config_parse_seconds(const char *s, uint64_t *ret_usec);
int config_parse_bool(const char *s, bool *ret);

const char *network_mode_to_string(NetworkMode m);
NetworkMode network_mode_from_string(const char *s);
