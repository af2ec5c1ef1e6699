/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Container Device Interface specs (DESIGN.md §9, API.md "NPU and other devices"): a strict
 * parser of CDI specs in their JSON form, and a registry that resolves fully-qualified device
 * names ("vendor.com/class=name") into the edits a bubblewrap sandbox can apply: device nodes
 * (--dev-bind), read-only binds and environment variables. Pure, but for cdi_registry_load()
 * (the directory scan). May call util/ and sandbox/ (the bind destination and environment name
 * rules of sandbox-argv.h).
 *
 * Specs are untrusted input (SECURITY.md): bounded (CDI_SPEC_SIZE_MAX and the other limits
 * below), strictly decoded (an unknown field anywhere refuses the whole spec, with its JSON
 * path), and never half-applied: an edit a sandbox cannot honour refuses its device (or the
 * whole spec, when it is a spec-level edit), with a reason.
 *
 * What is honoured, per edit:
 * - deviceNodes: "path" absolute, normalised, below /dev/; the host node is "hostPath" or else
 *   "path", absolute, normalised and below /dev/ too (it is bound read-write: a host path outside
 *   /dev would be a writable host file). "type" absent, "c" or "b"; "permissions" only of "rwm".
 *   The node is bind-mounted from the host (bwrap --dev-bind HOST PATH), never created:
 *   "major", "minor", "fileMode", "uid" and "gid" are type-checked but only informational, and so
 *   is "permissions" (no device cgroup: what the sandbox may do with the node is what the host
 *   node's mode allows the sandbox's uid).
 * - mounts: "hostPath" and "containerPath" absolute and normalised, "type" absent or "bind",
 *   "options" only of ro, nosuid, nodev, noexec, bind, rbind, private, rprivate, slave, rslave
 *   ("rw" is refused: every mount is bound read-only). "containerPath" must pass
 *   sandbox_bind_dest_valid(), or be what every sandbox already shows read-only from the host:
 *   at or below /usr, /bin, /sbin, /lib, /lib32, /lib64 or /libx32 with "hostPath" equal to
 *   "containerPath" (CdiEdits.visible: nothing to bind).
 * - env: "NAME=VALUE" with a NAME that sandbox_env_name_valid() accepts (no LD_*, PATH, HOME...).
 * - hooks (host programs run at container lifecycle points), additionalGids and intelRdt: refused
 *   when present and not empty.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Limits on one spec: its size, its devices, the entries of one edit set, any string's bytes. */
#define CDI_SPEC_SIZE_MAX ((size_t) 1024 * 1024)
#define CDI_DEVICES_MAX 1024
#define CDI_EDITS_MAX 256
#define CDI_STRING_MAX 4096
/* The entries of one spec directory looked at (files of any name), and the names one resolve takes. */
#define CDI_DIR_ENTRIES_MAX 1024
#define CDI_RESOLVE_NAMES_MAX 64

/* The default spec directories, by increasing precedence (the spec's /var/run/cdi over /etc/cdi). */
#define CDI_DIRS_DEFAULT { (char *) "/etc/cdi", (char *) "/var/run/cdi", NULL }

typedef struct CdiNode {
        char *host_path;        /* the node on the host (absolute, below /dev/) */
        char *path;             /* where the sandbox sees it (absolute, below /dev/) */
} CdiNode;

typedef struct CdiMount {
        char *host_path;
        char *container_path;   /* passes sandbox_bind_dest_valid(); bound read-only */
} CdiMount;

/* What a set of devices asks of a sandbox; each list sorted (a parent before what is below it)
 * and without duplicates. */
typedef struct CdiEdits {
        CdiNode *nodes;         /* bwrap --dev-bind HOST PATH */
        size_t n_nodes;
        CdiMount *mounts;       /* bwrap --ro-bind HOST PATH */
        size_t n_mounts;
        char **env;             /* "NAME=VALUE", sorted by NAME (bwrap --setenv) */
        char **visible;         /* mount paths every sandbox already shows: nothing to do */
} CdiEdits;

/* cdi_edits_done() - free what @e holds and reset it to empty. */
void cdi_edits_done(CdiEdits *e);

typedef struct CdiSpec CdiSpec;

/*
 * cdi_spec_parse() - one CDI spec in JSON form: @len bytes of @text (at most CDI_SPEC_SIZE_MAX,
 * NUL bytes refused). @origin (a file name, for the reasons; may be NULL) is copied.
 * A device whose edits a sandbox cannot honour is kept, with its reason (cdi_spec_device()).
 * Return: 0 with *@ret; -EBADMSG with a reason in *@ret_why (allocated, to free; not touched if
 * @ret_why is NULL) when the whole spec is refused: malformed JSON (json-c's error text), a
 * structure or type error, an unknown field (its JSON path is in the reason), a bad cdiVersion,
 * kind or device name, a duplicate device, a limit passed, or a spec-level edit a sandbox cannot
 * honour; -ENOMEM.
 */
int cdi_spec_parse(const char *text, size_t len, const char *origin, CdiSpec **ret, char **ret_why);

CdiSpec *cdi_spec_free(CdiSpec *s);
static inline void cdi_spec_freep(CdiSpec **s) {
        if (*s)
                *s = cdi_spec_free(*s);
}

/* cdi_spec_kind() - "vendor/class"; cdi_spec_origin(): the @origin it was parsed with, or NULL. */
const char *cdi_spec_kind(const CdiSpec *s);
const char *cdi_spec_origin(const CdiSpec *s);
/* cdi_spec_n_devices() - how many devices the spec defines (refused ones too). */
size_t cdi_spec_n_devices(const CdiSpec *s);
/*
 * cdi_spec_device() - device @i's name (without the kind) and why a sandbox cannot use it (NULL
 * if it can). Return: the name, or NULL if @i is out of range.
 */
const char *cdi_spec_device(const CdiSpec *s, size_t i, const char **ret_refusal);

/*
 * cdi_device_name_valid() - a fully-qualified device name: "vendor/class=name", vendor a DNS-like
 * name with at least one dot (labels of letters, digits and inner '-', ≤ 253 bytes), class
 * [A-Za-z0-9][A-Za-z0-9_.-]* (≤ 63 bytes), name [A-Za-z0-9][A-Za-z0-9_.:-]* (≤ 255 bytes).
 */
bool cdi_device_name_valid(const char *qualified);

typedef struct CdiRegistry CdiRegistry;

/*
 * cdi_registry_new_from_specs() - a registry of the @n parsed @specs, which it takes over (each
 * entry of @specs is set to NULL, on failure too). Spec i has precedence @precedence[i]: for a
 * device name that several specs define, the one of highest precedence wins; two of the same
 * highest precedence refuse the device (a conflict, as the CDI spec says of one directory).
 * The winner is used even if it is refused: a refused device never falls back to another
 * definition. Return: 0 or -ENOMEM.
 */
int cdi_registry_new_from_specs(CdiSpec **specs, const unsigned *precedence, size_t n, CdiRegistry **ret);

/*
 * cdi_registry_load() - the registry of the *.json specs in @dirs (NULL-terminated; later
 * directories take precedence over earlier ones, all specs of one directory have the same).
 * Each directory's names are read in sorted order, at most CDI_DIR_ENTRIES_MAX entries (more: the
 * directory is refused). A missing directory is no error. Spec files are followed if they are
 * symlinks (the directories belong to root, and packages link specs into them), but must then be
 * regular files of at most CDI_SPEC_SIZE_MAX bytes (opened O_NONBLOCK: a FIFO cannot block the
 * daemon). *.yaml and *.yml files are refused ("YAML specs are not read ..."); other names are
 * ignored. A directory, file or spec refused is listed by cdi_registry_refusals() and skipped.
 * Return: 0 with *@ret, or -ENOMEM.
 */
int cdi_registry_load(char *const *dirs, CdiRegistry **ret);

CdiRegistry *cdi_registry_free(CdiRegistry *r);
static inline void cdi_registry_freep(CdiRegistry **r) {
        if (*r)
                *r = cdi_registry_free(*r);
}

/* cdi_registry_devices() - the usable fully-qualified device names, sorted (a strv to free, never
 * NULL but on OOM). */
char **cdi_registry_devices(const CdiRegistry *reg);

/*
 * cdi_registry_refusals() - what was refused (a directory, a spec file, or a fully-qualified
 * device name) and why, for GET /npu/chips: directories and files in the order they were read,
 * then devices sorted by name. The arrays belong to @reg.
 * Return: the number of refusals (the length of both arrays).
 */
size_t cdi_registry_refusals(const CdiRegistry *reg, const char *const **ret_what, const char *const **ret_why);

/*
 * cdi_registry_resolve() - the edits for the devices @names (NULL-terminated, fully-qualified,
 * at most CDI_RESOLVE_NAMES_MAX distinct; a name given twice counts once): each spec's
 * spec-level edits once, and each device's own. All or nothing: on failure *@ret is not touched.
 * Two devices that ask for the same node path, mount path or variable with different host paths
 * or values conflict.
 * Return: 0 with *@ret (to free with cdi_edits_done()); otherwise a reason in *@ret_why
 * (allocated; not touched if @ret_why is NULL) and -EBADMSG a malformed name, -ENOENT an unknown
 * device, -EPERM a refused device, -EINVAL conflicting edits, -E2BIG too many names; -ENOMEM.
 */
int cdi_registry_resolve(const CdiRegistry *reg, char *const *names, CdiEdits *ret, char **ret_why);
