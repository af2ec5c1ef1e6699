/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A parsed CDI spec as cdi.c builds it and cdi-registry.c resolves it: each edit set already
 * checked against what a sandbox can honour, with the first reason it cannot.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npu/cdi.h"

/* One "containerEdits" object, in the spec's order; its lists are empty once it is refused. */
typedef struct CdiEditSet {
        CdiNode *nodes;
        size_t n_nodes;
        CdiMount *mounts;
        size_t n_mounts;
        char **env;             /* strv of "NAME=VALUE" */
        char **visible;         /* strv of mount paths every sandbox already shows */
        char *refusal;          /* why a sandbox cannot honour it, with the JSON path; NULL: it can */
} CdiEditSet;

typedef struct CdiDevice {
        char *name;             /* without the kind */
        CdiEditSet edits;
} CdiDevice;

struct CdiSpec {
        char *origin;           /* the file, or NULL */
        char *kind;             /* "vendor/class" */
        CdiEditSet edits;       /* spec-level: never refused (that refuses the whole spec) */
        CdiDevice *devices;
        size_t n_devices;
};

void cdi_edit_set_done(CdiEditSet *e);
/* cdi_edit_lists_free() - the lists a CdiEditSet and a CdiEdits both hold, with what they own. */
void cdi_edit_lists_free(CdiNode *nodes, size_t n_nodes, CdiMount *mounts, size_t n_mounts, char **env,
                         char **visible);
void cdi_node_done(CdiNode *n);
void cdi_mount_done(CdiMount *m);

/*
 * cdi_edits_parse() - the "containerEdits" object @o at the JSON path @path into @e (empty).
 * What a sandbox cannot honour is e->refusal, not an error.
 * Return: 0; -EBADMSG with *@why (allocated) for a structure error; -ENOMEM.
 */
int cdi_edits_parse(CdiEditSet *e, json_object *o, const char *path, char **why);

/*
 * The typed field helpers of the strict decoding (cdi.c). @path is the JSON path of @o ("" for
 * the top level); each returns 0, or -EBADMSG with *@why (allocated), or -ENOMEM.
 */
const char *cdi_shown(const char *path);                           /* @path, or "top level" */
char *cdi_path_join(const char *path, const char *key);            /* "path.key"; NULL on OOM */
char *cdi_path_index(const char *path, size_t i);                  /* "path[i]"; NULL on OOM */
int cdi_expect(json_object *o, json_type t, const char *path, char **why);
/* Every field of @o is one of @known (NULL-terminated). */
int cdi_known_fields(json_object *o, const char *path, const char *const *known, char **why);
/* A string of at most CDI_STRING_MAX bytes without NUL. */
int cdi_check_string(json_object *o, const char *path, const char **ret, char **why);
/* Field @key as cdi_check_string(); *@ret NULL when absent (an error if @required). */
int cdi_field_string(json_object *o, const char *path, const char *key, bool required, const char **ret,
                     char **why);
/* Field @key, if present, an integer in [@min, @max]. */
int cdi_field_integer(json_object *o, const char *path, const char *key, int64_t min, int64_t max, char **why);
/* An array of at most @max entries; *@ret_n its length. */
int cdi_check_array(json_object *o, const char *path, size_t max, size_t *ret_n, char **why);
/* An array of at most CDI_EDITS_MAX strings. */
int cdi_check_string_array(json_object *o, const char *path, char **why);
