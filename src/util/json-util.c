/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* json-c helpers of the tree (json-util.h). */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/io-util.h"
#include "util/json-util.h"

int json_text_check_strict(const char *text, size_t size, const char **ret_why) {
        for (size_t i = 0, in_string = 0; i < size; i++) {
                unsigned char c = (unsigned char) text[i];

                if (c < 0x20 && (in_string || (c != '\t' && c != '\n' && c != '\r'))) {
                        *ret_why = "raw control characters are not allowed in JSON (escape them)";
                        return -EBADMSG;
                }
                if (in_string) {
                        if (c == '\\')
                                i++;
                        else if (c == '"')
                                in_string = 0;
                } else if (c == '"')
                        in_string = 1;
                else if (c == '\'') {
                        *ret_why = "JSON strings and names must use double quotes";
                        return -EBADMSG;
                }
        }
        return 0;
}

int json_write_file_atomic_at(int dfd, const char *name, json_object *o, int flags, mode_t mode) {
        _cleanup_free_ char *buf = NULL;
        const char *text;
        size_t n;

        if (!o)
                return -ENOMEM;
        text = json_object_to_json_string_length(o, flags, &n);
        if (!text)
                return -ENOMEM;
        /* json-c's buffer holds the text; a copy adds the final newline. */
        buf = malloc(n + 1);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, text, n);
        buf[n] = '\n';
        return write_file_atomic_at(dfd, name, buf, n + 1, mode);
}

int json_parse_text(const char *text, size_t size, json_object **ret) {
        json_object *o;

        if (strlen(text) != size)
                return -EBADMSG;
        o = json_tokener_parse(text);
        if (!o)
                return -EBADMSG;
        *ret = o;
        return 0;
}


SR_DEFINE_FREE_FUNC(json_tokener *, json_tokener_free);

int json_parse_strict(const char *text, size_t len, int max_depth, json_object **ret,
                      enum json_tokener_error *ret_error) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        enum json_tokener_error err;

        if (len > INT_MAX)
                return -EFBIG;
        tok = json_tokener_new_ex(max_depth);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, text, (int) len);
        err = json_tokener_get_error(tok);
        if (err != json_tokener_success) {
                *ret_error = err;
                return -EBADMSG;
        }
        /* strchr() finds the terminator too: a NUL byte is not white space. */
        for (size_t end = json_tokener_get_parse_end(tok); end < len; end++)
                if (text[end] == '\0' || !strchr(" \t\r\n", text[end])) {
                        *ret_error = json_tokener_success;
                        return -EBADMSG;
                }
        *ret = STEAL(o);
        return 0;
}

int json_add(json_object *o, const char *key, json_object *v) {
        if (!v || json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

int json_array_add(json_object *a, json_object *v) {
        /* json-c takes a NULL element as JSON null: here it is the OOM of whoever made @v. */
        if (!v || json_object_array_add(a, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

json_object *json_strv_new(char *const *l) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();

        if (!a)
                return NULL;
        for (char *const *s = l; s && *s; s++)
                if (json_array_add(a, json_object_new_string(*s)) < 0)
                        return NULL;
        return STEAL(a);
}

json_object *json_unsigned_array_new(const unsigned *v, size_t n) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();

        if (!a)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (json_array_add(a, json_object_new_int64(v[i])) < 0)
                        return NULL;
        return STEAL(a);
}
