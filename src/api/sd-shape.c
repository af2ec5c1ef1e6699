/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Shaping of the ScienceDiscovery dialect's results from ours: ISO times, their combined output
 * budget and truncation marker, runnerWorkspaceKey checks and the workspace it names, and the
 * created/modified files as a diff of two snapshot trees. Pure but for the CAS reads of the diff.
 */

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/sd-internal.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "workspace/cas/cas.h"
#include "workspace/workspace.h"

char *sdp_iso_time(uint64_t ms, char buf[static 32]) {
        time_t t = (time_t) (ms / 1000);
        struct tm tm;
        size_t l;

        if (!gmtime_r(&t, &tm))
                tm = (struct tm) { .tm_year = 70, .tm_mday = 1 };
        l = strftime(buf, 24, "%Y-%m-%dT%H:%M:%S", &tm);
        (void) snprintf(buf + l, 32 - l, ".%03uZ", (unsigned) (ms % 1000));
        return buf;
}

static bool utf8_continuation(char c) {
        return ((unsigned char) c & 0xC0) == 0x80;
}

/* @s cut to @share bytes: head and tail around the marker, split on UTF-8 boundaries. */
static int bound_one(const char *s, size_t size, size_t share, uint64_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *marker = NULL;
        size_t ml, keep, head, tail;
        char *o;
        int n;

        if (size <= share) {
                o = malloc(size + 1);
                if (!o)
                        return -ENOMEM;
                memcpy(o, s, size);
                o[size] = '\0';
                *ret = o;
                *ret_size = size;
                return 0;
        }
        n = asprintf(&marker, "\n...[output truncated: exceeded %" PRIu64
                     " bytes; set SCIENCE_AGENT_MAX_OUTPUT_BYTES=0 to disable]...\n", max);
        if (n < 0)
                return -ENOMEM;
        ml = (size_t) n;
        if (share < ml) {
                /* No room for the marker: the head alone, still within the share. */
                ml = 0;
                marker[0] = '\0';
        }
        keep = share - ml;
        head = keep - keep / 2;
        tail = keep / 2;
        while (head > 0 && utf8_continuation(s[head]))
                head--;
        while (tail > 0 && utf8_continuation(s[size - tail]))
                tail--;
        o = malloc(head + ml + tail + 1);
        if (!o)
                return -ENOMEM;
        memcpy(o, s, head);
        memcpy(o + head, marker, ml);
        memcpy(o + head + ml, s + size - tail, tail);
        o[head + ml + tail] = '\0';
        *ret = o;
        *ret_size = head + ml + tail;
        return 0;
}

int sdp_output_bound(const char *out, size_t out_size, const char *err, size_t err_size, uint64_t max,
                     char **ret_out, size_t *ret_out_size, char **ret_err, size_t *ret_err_size) {
        _cleanup_free_ char *o = NULL;
        size_t out_share = out_size, err_share = err_size;
        int r;

        /* Together at most @max: the smaller stream keeps up to half, the other the rest. */
        if (max > 0 && (uint64_t) out_size + err_size > max) {
                size_t half = (size_t) (max / 2);

                if (out_size <= err_size) {
                        out_share = MIN(out_size, half);
                        err_share = (size_t) max - out_share;
                } else {
                        err_share = MIN(err_size, half);
                        out_share = (size_t) max - err_share;
                }
        }
        r = bound_one(out, out_size, out_share, max, &o, ret_out_size);
        if (r < 0)
                return r;
        r = bound_one(err, err_size, err_share, max, ret_err, ret_err_size);
        if (r < 0)
                return r;
        *ret_out = STEAL(o);
        return 0;
}

bool sdp_runner_workspace_key_valid(const char *key) {
        size_t l = key ? strlen(key) : 0;
        const char *seg;

        if (l == 0 || l > 500 || key[0] == '/')
                return false;
        seg = key;
        for (const char *p = key;; p++) {
                if (*p == '/' || *p == '\0') {
                        size_t sl = (size_t) (p - seg);
                        if (sl == 0 || (sl == 1 && seg[0] == '.') || (sl == 2 && seg[0] == '.' && seg[1] == '.'))
                                return false;
                        if (*p == '\0')
                                return true;
                        seg = p + 1;
                        continue;
                }
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      *p == '.' || *p == '_' || *p == '-'))
                        return false;
        }
}

void sdp_workspace_for_key(const char *key, char ret[static 129]) {
        static const char hex[] = "0123456789abcdef";
        uint8_t d[SHA256_DIGEST_SIZE];
        struct sha256_ctx ctx;

        if (strlen(key) <= 128 && workspace_id_valid(key)) {
                strcpy(ret, key);
                return;
        }
        sha256_init(&ctx);
        sha256_update(&ctx, strlen(key), (const uint8_t *) key);
        sha256_digest(&ctx, sizeof(d), d);
        strcpy(ret, "sd-");
        for (size_t i = 0; i < 20; i++) {
                ret[3 + 2 * i] = hex[d[i] >> 4];
                ret[3 + 2 * i + 1] = hex[d[i] & 15];
        }
        ret[43] = '\0';
}

static int add_path(json_object *a, const char *prefix, const char *name) {
        _cleanup_free_ char *p = NULL;
        json_object *s;

        if (asprintf(&p, "%s%s", prefix, name) < 0)
                return -ENOMEM;
        s = json_object_new_string(p);
        if (!s || json_object_array_add(a, s) < 0) {
                json_object_put(s);
                return -ENOMEM;
        }
        return 0;
}

static int diff_dir(struct Cas *cas, const char *old, const char *new, const char *prefix, json_object *created,
                    json_object *modified) {
        CasEntry *oe = NULL, *ne = NULL;
        size_t on = 0, nn = 0, j = 0;
        int r;

        r = cas_tree_list(cas, new, "", &ne, &nn);
        if (r < 0)
                return r;
        if (old) {
                r = cas_tree_list(cas, old, "", &oe, &on);
                if (r < 0)
                        goto finish;
        }
        for (size_t i = 0; i < nn && r >= 0; i++) {
                const CasEntry *o = NULL;
                int c = 1;

                /* Both lists are sorted by name: walk them together. */
                while (j < on && (c = strcmp(oe[j].name, ne[i].name)) < 0)
                        j++;
                if (j < on && c == 0)
                        o = &oe[j];
                if (ne[i].type == DT_REG) {
                        if (!o || o->type != DT_REG)
                                r = add_path(created, prefix, ne[i].name);
                        else if (!streq(o->digest, ne[i].digest))
                                r = add_path(modified, prefix, ne[i].name);
                } else if (ne[i].type == DT_DIR) {
                        _cleanup_free_ char *sub = NULL;
                        bool same_dir = o && o->type == DT_DIR;

                        if (same_dir && streq(o->digest, ne[i].digest))
                                continue;
                        if (asprintf(&sub, "%s%s/", prefix, ne[i].name) < 0) {
                                r = -ENOMEM;
                                break;
                        }
                        r = diff_dir(cas, same_dir ? o->digest : NULL, ne[i].digest, sub, created, modified);
                }
        }
finish:
        cas_entries_free(ne, nn);
        cas_entries_free(oe, on);
        return r;
}

static int cmp_json_strings(const void *a, const void *b) {
        return strcmp(json_object_get_string(*(json_object *const *) a),
                      json_object_get_string(*(json_object *const *) b));
}

int sdp_tree_diff(struct Cas *cas, const char *old, const char *new, json_object **ret_created,
                  json_object **ret_modified) {
        _cleanup_(json_object_putp) json_object *created = json_object_new_array();
        _cleanup_(json_object_putp) json_object *modified = json_object_new_array();
        int r;

        if (!created || !modified)
                return -ENOMEM;
        r = diff_dir(cas, old, new, "", created, modified);
        if (r < 0)
                return r;
        json_object_array_sort(created, cmp_json_strings);
        json_object_array_sort(modified, cmp_json_strings);
        *ret_created = STEAL(created);
        *ret_modified = STEAL(modified);
        return 0;
}
