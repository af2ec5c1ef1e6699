/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Replies and request parsing of the transport: JSON answers, {"error": code, "message": …}
 * bodies, strict JSON request bodies, route patterns, and the one table that gives every error of
 * the API its code and HTTP status (with the errno → HTTP map of STYLE.md §4 drawn from it). Pure
 * but for queueing replies through http-server; may call util/ only, never a module of the
 * daemon (core/, execution/, workspace/, egress/).
 */

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http-error.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/utf8.h"

/* ---- pure helpers ---------------------------------------------------------------------------- */


static int json_check(json_object *o, unsigned depth, const char **ret_why) {
        if (depth > HTTP_JSON_MAX_DEPTH) {
                *ret_why = "JSON nesting is too deep";
                return -EBADMSG;
        }
        switch (json_object_get_type(o)) {
        case json_type_string: {
                const char *s = json_object_get_string(o);
                size_t n = (size_t) json_object_get_string_len(o);
                if (strlen(s) != n) {
                        *ret_why = "JSON strings must not contain \\u0000";
                        return -EBADMSG;
                }
                /* Escapes can produce what raw-byte validation cannot see (a lone \\ud800). */
                if (!utf8_valid(s, n)) {
                        *ret_why = "JSON strings must be valid Unicode (no lone surrogates)";
                        return -EBADMSG;
                }
                return 0;
        }
        case json_type_double:
                if (!isfinite(json_object_get_double(o))) {
                        *ret_why = "JSON number out of range";
                        return -EBADMSG;
                }
                return 0;
        case json_type_object: {
                json_object_object_foreach(o, key, val) {
                        int r;
                        if (!utf8_valid(key, strlen(key))) {
                                *ret_why = "JSON keys must be valid Unicode";
                                return -EBADMSG;
                        }
                        r = json_check(val, depth + 1, ret_why);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        case json_type_array:
                for (size_t i = 0; i < json_object_array_length(o); i++) {
                        int r = json_check(json_object_array_get_idx(o, i), depth + 1, ret_why);
                        if (r < 0)
                                return r;
                }
                return 0;
        case json_type_null:
        case json_type_boolean:
        case json_type_int:
                return 0;
        }
        return 0;
}

int http_json_parse(const char *body, size_t size, json_object **ret, const char **ret_why) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        struct json_tokener *tok;
        enum json_tokener_error err;
        size_t end;
        int r;

        if (size == 0) {
                *ret_why = "the request body is empty; a JSON object is required";
                return -EBADMSG;
        }
        if (size > INT32_MAX) {
                *ret_why = "the request body is too large";
                return -EBADMSG;
        }
        r = json_text_check_strict(body, size, ret_why);
        if (r < 0)
                return r;

        tok = json_tokener_new_ex(HTTP_JSON_MAX_DEPTH + 1);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, body, (int) size);
        err = json_tokener_get_error(tok);
        end = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);

        if (err == json_tokener_continue) {
                *ret_why = "the JSON document is incomplete";
                return -EBADMSG;
        }
        if (err == json_tokener_error_depth) {
                *ret_why = "JSON nesting is too deep";
                return -EBADMSG;
        }
        if (err != json_tokener_success) {
                *ret_why = json_tokener_error_desc(err);
                return -EBADMSG;
        }
        for (; end < size; end++)
                if (!strchr(" \t\r\n", body[end])) {
                        *ret_why = "trailing data after the JSON document";
                        return -EBADMSG;
                }
        if (!json_object_is_type(o, json_type_object)) {
                *ret_why = "the request body must be a JSON object";
                return -EBADMSG;
        }
        r = json_check(o, 1, ret_why);
        if (r < 0)
                return r;
        *ret = STEAL(o);
        return 0;
}

static size_t skip_json_ws(const char *b, size_t i, size_t size) {
        /* JSON whitespace (RFC 8259): space, tab, LF, CR. */
        while (i < size && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'))
                i++;
        return i;
}

bool http_body_is_empty(const void *body, size_t size) {
        const char *b = body;
        size_t i;

        i = skip_json_ws(b, 0, size);
        if (i == size)
                return true;
        if (b[i] != '{')
                return false;
        i = skip_json_ws(b, i + 1, size);
        if (i == size || b[i] != '}')
                return false;
        return skip_json_ws(b, i + 1, size) == size;
}

static int route_match(const char *p, const char *q, const char **params, size_t *lens, size_t max, size_t n) {
        for (;;) {
                if (*p == '\0' && *q == '\0')
                        return (int) n;
                if (p[0] == '*' && p[1] == '*' && p[2] == '\0') {
                        /* "**" at the end: the (non-empty) rest of the path, slashes included. */
                        size_t l = strlen(q);
                        if (l == 0 || n >= max)
                                return -ENOENT;
                        params[n] = q;
                        lens[n] = l;
                        return (int) n + 1;
                }
                if (strneq(p, "<ref>", 5)) {
                        size_t l;

                        if (n >= max)
                                return -ENOENT;
                        /* The listed form "workspace/<ws>/<id>" first: its slashes are not path
                         * separators here. Only if the rest of the pattern cannot match after
                         * it, the single segment (an execution id, "workspace" included). */
                        if (strneq(q, "workspace/", 10)) {
                                /* (strchr(), not q + 10: gcc's overread check cannot follow that.) */
                                const char *e = strchr(q, '/') + 1;

                                l = strcspn(e, "/");
                                if (l > 0 && e[l] == '/') {
                                        e += l + 1;
                                        l = strcspn(e, "/");
                                        if (l > 0) {
                                                int r = route_match(p + 5, e + l, params, lens, max, n + 1);
                                                if (r >= 0) {
                                                        params[n] = q;
                                                        lens[n] = (size_t) (e + l - q);
                                                        return r;
                                                }
                                        }
                                }
                        }
                        l = strcspn(q, "/");
                        if (l == 0)
                                return -ENOENT;
                        params[n] = q;
                        lens[n] = l;
                        n++;
                        p += 5;
                        q += l;
                        continue;
                }
                if (*p == '*') {
                        size_t l = strcspn(q, "/");
                        if (l == 0 || n >= max)
                                return -ENOENT;
                        params[n] = q;
                        lens[n] = l;
                        n++;
                        p++;
                        q += l;
                        continue;
                }
                if (*p != *q)
                        return -ENOENT;
                p++;
                q++;
        }
}

int http_route_match(const char *pattern, const char *path, const char **params, size_t *lens, size_t max) {
        return route_match(pattern, path, params, lens, max, 0);
}

/* ---- replies --------------------------------------------------------------------------------- */

void http_reply_json(HttpRequest *req, unsigned status, json_object *o) {
        const char *s;
        int r;

        if (!o)
                return http_reply_oom(req);
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        r = http_request_reply(req, status, "application/json", s, strlen(s), false, NULL);
        if (r < 0)
                log_warning_errno(r, "Failed to queue a reply, ignoring: %m");
}

void http_reply_error_full(HttpRequest *req, HttpError error, bool close, const char *const *headers,
                           const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL, *body = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r >= 0)
                body = http_error_json(http_error_code(error), msg);
        if (!body) {
                static const char oom[] = "{\"error\":\"internal\",\"message\":\"Out of memory.\"}";
                (void) http_request_reply(req, http_error_status(HTTP_ERROR_INTERNAL), "application/json",
                                          oom, strlen(oom), true, NULL);
                return;
        }
        r = http_request_reply(req, http_error_status(error), "application/json", body, strlen(body), close, headers);
        if (r < 0)
                log_warning_errno(r, "Failed to queue an error reply, ignoring: %m");
}

void http_reply_oom(HttpRequest *req) {
        http_reply_error(req, HTTP_ERROR_INTERNAL, "Out of memory.");
}
