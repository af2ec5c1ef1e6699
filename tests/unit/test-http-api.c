/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/http/http-reply.h and src/api/api.h: error bodies, the errno → status map, JSON
 * bodies, empty bodies, route matching, revision refs. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "api/api.h"
#include "http/http-reply.h"

/* ---- helpers ------------------------------------------------------------------------------- */

/* Strict RFC 3629 UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
static bool utf8_valid(const unsigned char *s, size_t n) {
        size_t i = 0;

        while (i < n) {
                unsigned char c = s[i];
                size_t len;
                uint32_t cp;

                if (c < 0x80) {
                        i++;
                        continue;
                }
                if (c >= 0xc2 && c <= 0xdf) {
                        len = 2;
                        cp = c & 0x1f;
                } else if (c >= 0xe0 && c <= 0xef) {
                        len = 3;
                        cp = c & 0x0f;
                } else if (c >= 0xf0 && c <= 0xf4) {
                        len = 4;
                        cp = c & 0x07;
                } else
                        return false;
                if (i + len > n)
                        return false;
                for (size_t k = 1; k < len; k++) {
                        if ((s[i + k] & 0xc0) != 0x80)
                                return false;
                        cp = (cp << 6) | (s[i + k] & 0x3f);
                }
                if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
                    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
                        return false;
                i += len;
        }
        return true;
}

/* json-c's own strict parse of an http_error_json() result, for the round trip. */
static json_object *parse_strict(const char *s) {
        struct json_tokener *tok = json_tokener_new();
        json_object *o;

        assert_non_null(tok);
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, s, (int) strlen(s));
        if (json_tokener_get_error(tok) != json_tokener_success) {
                json_object_put(o);
                o = NULL;
        }
        json_tokener_free(tok);
        return o;
}

static void assert_error_round_trip(const char *json, const char *code, const char *message) {
        json_object *o, *v;

        o = parse_strict(json);
        if (!o)
                fail_msg("http_error_json() output does not parse back: %s", json);
        assert_true(json_object_is_type(o, json_type_object));
        assert_int_equal(json_object_object_length(o), 2);
        assert_true(json_object_object_get_ex(o, "error", &v));
        assert_true(json_object_is_type(v, json_type_string));
        assert_string_equal(json_object_get_string(v), code);
        assert_true(json_object_object_get_ex(o, "message", &v));
        assert_true(json_object_is_type(v, json_type_string));
        assert_string_equal(json_object_get_string(v), message);
        json_object_put(o);
}

/* ---- http_error_json() --------------------------------------------------------------------- */

static void test_error_json_simple(void **state) {
        char *s = http_error_json("not_found", "No such endpoint.");

        assert_non_null(s);
        assert_string_equal(s, "{\"error\":\"not_found\",\"message\":\"No such endpoint.\"}");
        assert_error_round_trip(s, "not_found", "No such endpoint.");
        free(s);

        /* Slashes are not escaped (paths read naturally). */
        s = http_error_json("not_found", "No such file /a/b.");
        assert_non_null(s);
        assert_string_equal(s, "{\"error\":\"not_found\",\"message\":\"No such file /a/b.\"}");
        free(s);

        s = http_error_json("internal", "");
        assert_non_null(s);
        assert_string_equal(s, "{\"error\":\"internal\",\"message\":\"\"}");
        free(s);
}

static void test_error_json_control(void **state) {
        char *s;

        /* Every control character, DEL included, is dropped. */
        s = http_error_json("invalid_request", "a\x01" "b\nc\rd\te\x1b[31mf\x7fg\x1fh");
        assert_non_null(s);
        assert_string_equal(s, "{\"error\":\"invalid_request\",\"message\":\"abcde[31mfgh\"}");
        assert_error_round_trip(s, "invalid_request", "abcde[31mfgh");
        free(s);

        s = http_error_json("invalid_request", "\n\n\n");
        assert_non_null(s);
        assert_string_equal(s, "{\"error\":\"invalid_request\",\"message\":\"\"}");
        free(s);
}

static void test_error_json_quotes(void **state) {
        char *s;

        s = http_error_json("invalid_request", "Bad \"name\": 'x' \\ y");
        assert_non_null(s);
        assert_string_equal(s, "{\"error\":\"invalid_request\",\"message\":\"Bad \\\"name\\\": 'x' \\\\ y\"}");
        assert_error_round_trip(s, "invalid_request", "Bad \"name\": 'x' \\ y");
        free(s);

        /* An attempt to close the string and inject a member stays inside the message. */
        s = http_error_json("forbidden", "\",\"error\":\"ok");
        assert_non_null(s);
        assert_error_round_trip(s, "forbidden", "\",\"error\":\"ok");
        free(s);

        /* Valid UTF-8 passes through. */
        s = http_error_json("not_found", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
        assert_non_null(s);
        assert_true(utf8_valid((const unsigned char *) s, strlen(s)));
        assert_error_round_trip(s, "not_found", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
        free(s);
}

static void test_error_json_invalid_utf8(void **state) {
        /*
         * The message may carry bytes from the request (the method in the 405 text, for one).
         * Whatever comes in, the body is JSON, and JSON is UTF-8 (RFC 8259 §8.1): the result
         * must be valid UTF-8 and must parse back with a validating parser.
         */
        static const char *const messages[] = {
                "Method \xff\xfe is not allowed here.",
                "truncated \xc3",
                "overlong \xc0\xaf",
                "surrogate \xed\xa0\x80",
        };

        unsigned n = 0;

        for (size_t i = 0; i < sizeof(messages) / sizeof(messages[0]); i++) {
                char *s = http_error_json("method_not_allowed", messages[i]);
                json_object *o;

                assert_non_null(s);
                o = parse_strict(s);
                if (!utf8_valid((const unsigned char *) s, strlen(s)) || !o) {
                        print_error("http_error_json() emitted invalid UTF-8 for message #%zu\n", i);
                        n++;
                }
                json_object_put(o);
                free(s);
        }
        assert_int_equal(n, 0);
}

/* ---- http_status_from_errno() -------------------------------------------------------------- */

static void test_status_from_errno(void **state) {
        /* STYLE.md §4. */
        assert_int_equal(http_status_from_errno(-EINVAL), 400);
        assert_int_equal(http_status_from_errno(-EBADMSG), 400);
        assert_int_equal(http_status_from_errno(-EPERM), 403);
        assert_int_equal(http_status_from_errno(-EACCES), 403);
        assert_int_equal(http_status_from_errno(-ENOENT), 404);
        assert_int_equal(http_status_from_errno(-EEXIST), 409);
        assert_int_equal(http_status_from_errno(-E2BIG), 413);
        assert_int_equal(http_status_from_errno(-EDQUOT), 507);
        assert_int_equal(http_status_from_errno(-EBUSY), 503);
        assert_int_equal(http_status_from_errno(-EAGAIN), 503);
        assert_int_equal(http_status_from_errno(-ENOMEM), 503);
        /* Everything else is 500. */
        assert_int_equal(http_status_from_errno(-EIO), 500);
        assert_int_equal(http_status_from_errno(-ENOSYS), 500);
        assert_int_equal(http_status_from_errno(-ETIME), 500);
        assert_int_equal(http_status_from_errno(-EKEYREJECTED), 500);
        assert_int_equal(http_status_from_errno(-ENODATA), 500);
        assert_int_equal(http_status_from_errno(-ENOTDIR), 500);
        assert_int_equal(http_status_from_errno(-EPROTO), 500);
        assert_int_equal(http_status_from_errno(-9999), 500);
        /* Positive errno values map the same way. */
        assert_int_equal(http_status_from_errno(EINVAL), 400);
        assert_int_equal(http_status_from_errno(ENOENT), 404);
        assert_int_equal(http_status_from_errno(EDQUOT), 507);
}

/* ---- http_json_parse() --------------------------------------------------------------------- */

static int parse_n(const char *body, size_t size, json_object **ret, const char **ret_why) {
        *ret = NULL;
        *ret_why = NULL;
        return http_json_parse(body, size, ret, ret_why);
}

static void assert_json_ok(const char *body) {
        json_object *o;
        const char *why;
        int r;

        r = parse_n(body, strlen(body), &o, &why);
        if (r != 0)
                fail_msg("http_json_parse(%s) = %d (%s)", body, r, why ?: "no reason");
        assert_non_null(o);
        assert_true(json_object_is_type(o, json_type_object));
        json_object_put(o);
}

static void assert_json_bad_n(const char *body, size_t size) {
        json_object *o;
        const char *why;
        int r;

        r = parse_n(body, size, &o, &why);
        if (r != -EBADMSG)
                fail_msg("http_json_parse(%.*s) = %d, expected -EBADMSG", (int) (size > 120 ? 120 : size),
                         body, r);
        /* A reason for the client, and no object. */
        assert_non_null(why);
        assert_true(strlen(why) > 0);
        assert_null(o);
}

static void assert_json_bad(const char *body) {
        assert_json_bad_n(body, strlen(body));
}

/* Like assert_json_bad_n(), but only counts a failure, so one test reports every bad case. */
static unsigned check_json_bad_n(const char *body, size_t size, const char *what) {
        json_object *o;
        const char *why;
        int r;

        r = parse_n(body, size, &o, &why);
        if (r == -EBADMSG && why && !o)
                return 0;
        print_error("accepted (r=%d): %s\n", r, what);
        json_object_put(o);
        return 1;
}

#define CHECK_JSON_BAD(n_failed, literal, what) \
        ((n_failed) += check_json_bad_n((literal), sizeof(literal) - 1, (what)))

static char *nested(unsigned arrays) {
        /* {"a":[[[...]]]}: an object holding @arrays nested arrays, so depth = arrays + 1. */
        char *s = malloc(arrays * 2 + 8), *p;

        assert_non_null(s);
        p = stpcpy(s, "{\"a\":");
        memset(p, '[', arrays);
        p += arrays;
        memset(p, ']', arrays);
        p += arrays;
        strcpy(p, "}");
        return s;
}

static void test_json_valid(void **state) {
        json_object *o, *v;
        const char *why;
        static const char body[] =
                "{\"executionId\":\"a1\",\"timeoutMs\":30000,\"env\":{\"K\":\"v\"},"
                "\"argv\":[\"python3\",\"-c\",\"print(1)\"],\"x\":null,\"y\":true,\"z\":-1.5}";

        assert_int_equal(parse_n(body, strlen(body), &o, &why), 0);
        assert_non_null(o);
        assert_true(json_object_object_get_ex(o, "executionId", &v));
        assert_string_equal(json_object_get_string(v), "a1");
        assert_true(json_object_object_get_ex(o, "timeoutMs", &v));
        assert_int_equal(json_object_get_int64(v), 30000);
        assert_true(json_object_object_get_ex(o, "argv", &v));
        assert_int_equal(json_object_array_length(v), 3);
        json_object_put(o);

        assert_json_ok("{}");
        assert_json_ok(" \t\r\n{ \"a\" : 1 } \r\n\t ");
        assert_json_ok("{\"a\":\"caf\xc3\xa9 \\u00e9 \\ud83d\\ude00\"}");
        assert_json_ok("{\"a\":1e308,\"b\":-0,\"c\":1E-5,\"d\":1e-999999}");

        /* The size is honoured: what follows it is not looked at. */
        assert_int_equal(parse_n("{\"a\":1}garbage", 7, &o, &why), 0);
        json_object_put(o);
}

static void test_json_not_an_object(void **state) {
        assert_json_bad_n("", 0);
        assert_json_bad("   ");
        assert_json_bad("null");
        assert_json_bad("[]");
        assert_json_bad("[{\"a\":1}]");
        assert_json_bad("\"string\"");
        assert_json_bad("42");
        assert_json_bad("true");
}

static void test_json_syntax(void **state) {
        /* Truncated. */
        assert_json_bad("{");
        assert_json_bad("{\"a\":");
        assert_json_bad("{\"a\":\"x");
        assert_json_bad("{\"a\":[1,2");
        assert_json_bad_n("{\"a\":1}", 6);
        /* Trailing garbage. */
        assert_json_bad("{\"a\":1} x");
        assert_json_bad("{\"a\":1}{}");
        assert_json_bad("{}}");
        assert_json_bad("{}]");
        assert_json_bad("{},");
        /* Not JSON. */
        assert_json_bad("{a:1}");
        assert_json_bad("{\"a\":'x'}");
        assert_json_bad("{\"a\":1,}");
        assert_json_bad("{\"a\":[1,]}");
        assert_json_bad("{\"a\":01}");
        assert_json_bad("{\"a\":+1}");
        assert_json_bad("{\"a\":.5}");
        assert_json_bad("{\"a\":0x10}");
        assert_json_bad("{\"a\":/*c*/1}");
        assert_json_bad("{\"a\":TRUE}");
        assert_json_bad("{\"a\":\"\\x41\"}");
        assert_json_bad("{\"a\" 1}");
        assert_json_bad("\xef\xbb\xbf{}");                     /* BOM */
}

static void test_json_strictness(void **state) {
        unsigned n = 0;

        /* RFC 8259 leaves no room for these either; the header promises strict JSON. */
        CHECK_JSON_BAD(n, "{'a':1}", "single-quoted member name {'a':1}");
        CHECK_JSON_BAD(n, "{\"a\":{'b':1}}", "nested single-quoted member name");
        /* json-c reads "1." as 1.0; harmless, documented in docs/api.md, not checked here. */
        CHECK_JSON_BAD(n, "{\"a\":\"x\ty\"}", "raw TAB inside a string");
        CHECK_JSON_BAD(n, "{\"a\":\"x\ny\"}", "raw LF inside a string");
        CHECK_JSON_BAD(n, "{\"a\":\"\x01\"}", "raw U+0001 inside a string");
        assert_int_equal(n, 0);
}

static void test_json_trailing_nul(void **state) {
        unsigned n = 0;

        /* NUL is not JSON whitespace: a body with NULs after the document has trailing data. */
        CHECK_JSON_BAD(n, "{\"a\":1}\0", "one trailing NUL");
        CHECK_JSON_BAD(n, "{\"a\":1}\0\0\0\0", "four trailing NULs");
        CHECK_JSON_BAD(n, "{\"a\":1}\0x", "trailing NUL and garbage");
        CHECK_JSON_BAD(n, "{\"a\":1} \n\0", "whitespace, then a NUL");
        assert_int_equal(n, 0);
}

static void test_json_numbers(void **state) {
        json_object *o, *v;
        const char *why;
        char big[1100];
        int r;

        /* Non-finite numbers. */
        assert_json_bad("{\"a\":1e999999}");
        assert_json_bad("{\"a\":-1e999}");
        assert_json_bad("{\"a\":[1,{\"b\":1e400}]}");
        assert_json_bad("{\"a\":NaN}");
        assert_json_bad("{\"a\":Infinity}");
        assert_json_bad("{\"a\":-Infinity}");
        assert_json_bad("{\"a\":nan}");

        /*
         * A 1000-digit integer: json-c 0.16 accepts it and saturates (an int that reads back as
         * INT64_MAX, or INT64_MIN for a negative one); it never wraps to a small or negative
         * number. That is safe as long as handlers cap values by the configured maxima.
         */
        strcpy(big, "{\"a\":");
        memset(big + 5, '9', 1000);
        strcpy(big + 1005, "}");
        r = parse_n(big, strlen(big), &o, &why);
        if (r == 0) {
                assert_true(json_object_object_get_ex(o, "a", &v));
                assert_true(json_object_is_type(v, json_type_int));
                assert_int_equal(json_object_get_int64(v), INT64_MAX);
                json_object_put(o);
        } else
                assert_int_equal(r, -EBADMSG);

        strcpy(big, "{\"a\":-");
        memset(big + 6, '9', 1000);
        strcpy(big + 1006, "}");
        r = parse_n(big, strlen(big), &o, &why);
        if (r == 0) {
                assert_true(json_object_object_get_ex(o, "a", &v));
                assert_true(json_object_is_type(v, json_type_int));
                assert_true(json_object_get_int64(v) == INT64_MIN);
                json_object_put(o);
        } else
                assert_int_equal(r, -EBADMSG);
}

static void test_json_depth(void **state) {
        json_object *o;
        const char *why;

        /* Depth up to HTTP_JSON_MAX_DEPTH (64) is fine: an object holding 63 nested arrays. */
        for (unsigned arrays = 1; arrays < HTTP_JSON_MAX_DEPTH; arrays++) {
                char *s = nested(arrays);

                if (parse_n(s, strlen(s), &o, &why) != 0)
                        fail_msg("depth %u refused: %s", arrays + 1, why ?: "?");
                json_object_put(o);
                free(s);
        }
        /* Deeper is refused, 65 arrays in particular, and far deeper without trouble. */
        for (unsigned arrays = HTTP_JSON_MAX_DEPTH; arrays <= 70; arrays++) {
                char *s = nested(arrays);

                assert_json_bad(s);
                free(s);
        }
        {
                char *s = nested(100000);

                assert_json_bad(s);
                free(s);
        }
        /* Depth through objects counts the same. */
        {
                char s[1024], *p = s;

                for (unsigned i = 0; i < 70; i++)
                        p = stpcpy(p, "{\"a\":");
                p = stpcpy(p, "1");
                for (unsigned i = 0; i < 70; i++)
                        *p++ = '}';
                *p = '\0';
                assert_json_bad(s);
        }
}

static void test_json_strings(void **state) {
        json_object *o, *v;
        const char *why;
        int r;

        /* NUL inside a string, escaped or not. */
        assert_json_bad("{\"a\":\"x\\u0000y\"}");
        assert_json_bad("{\"a\":\"\\u0000\"}");
        assert_json_bad("{\"a\":[\"ok\",\"\\u0000\"]}");
        assert_json_bad("{\"a\":{\"b\":\"\\u0000\"}}");
        assert_json_bad_n("{\"a\":\"x\0y\"}", 11);

        /* Invalid UTF-8 bytes. */
        assert_json_bad("{\"a\":\"\xff\"}");
        assert_json_bad("{\"a\":\"\x80\"}");
        assert_json_bad("{\"a\":\"\xc3\"}");
        assert_json_bad("{\"a\":\"\xc3\x28\"}");
        assert_json_bad("{\"\xfe\":1}");

        /*
         * A lone surrogate escape: json-c 0.16 turns it into U+FFFD, which is valid UTF-8 and
         * safe to echo. Whatever json-c does, invalid UTF-8 must not come out.
         */
        r = parse_n("{\"a\":\"\\ud800\"}", 14, &o, &why);
        if (r == 0) {
                const char *out;

                assert_true(json_object_object_get_ex(o, "a", &v));
                assert_true(utf8_valid((const unsigned char *) json_object_get_string(v),
                                       (size_t) json_object_get_string_len(v)));
                assert_string_equal(json_object_get_string(v), "\xef\xbf\xbd");
                out = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
                assert_true(utf8_valid((const unsigned char *) out, strlen(out)));
                json_object_put(o);
        } else
                assert_int_equal(r, -EBADMSG);          /* refusing it is safe too */
        r = parse_n("{\"a\":\"x\\udc00\\ud800y\"}", 22, &o, &why);
        if (r == 0) {
                assert_true(json_object_object_get_ex(o, "a", &v));
                assert_true(utf8_valid((const unsigned char *) json_object_get_string(v),
                                       (size_t) json_object_get_string_len(v)));
                assert_string_equal(json_object_get_string(v), "x\xef\xbf\xbd\xef\xbf\xbdy");
                json_object_put(o);
        } else
                assert_int_equal(r, -EBADMSG);
}

static void test_json_utf8_strict(void **state) {
        /*
         * The header promises valid UTF-8. These are not (RFC 3629 §3): overlong encodings (the
         * classic "\xc0\xaf" for '/'), UTF-8-encoded surrogates, code points above U+10FFFF.
         */
        unsigned n = 0;

        CHECK_JSON_BAD(n, "{\"a\":\"\xc0\xaf\"}", "overlong C0 AF ('/')");
        CHECK_JSON_BAD(n, "{\"a\":\"\xc1\xbf\"}", "overlong C1 BF");
        CHECK_JSON_BAD(n, "{\"a\":\"\xe0\x80\xaf\"}", "overlong E0 80 AF ('/')");
        CHECK_JSON_BAD(n, "{\"a\":\"\xed\xa0\x80\"}", "UTF-8-encoded surrogate ED A0 80 (U+D800)");
        CHECK_JSON_BAD(n, "{\"a\":\"\xf4\x90\x80\x80\"}", "F4 90 80 80 (U+110000)");
        CHECK_JSON_BAD(n, "{\"\xc0\xaf\":1}", "overlong C0 AF in a member name");
        assert_int_equal(n, 0);
}

/* ---- http_body_is_empty() ------------------------------------------------------------------- */

#define BODY_EMPTY(lit) http_body_is_empty(lit, sizeof(lit) - 1)

static void test_body_empty(void **state) {
        /* What clients send to endpoints without a body. */
        assert_true(http_body_is_empty(NULL, 0));
        assert_true(BODY_EMPTY(""));
        assert_true(BODY_EMPTY("{}"));
        assert_true(BODY_EMPTY(" { } "));
        assert_true(BODY_EMPTY("{}\n"));
        assert_true(BODY_EMPTY("\r\n\t{\r\n\t}\r\n\t"));
        assert_true(BODY_EMPTY("   "));
        assert_true(BODY_EMPTY("\n"));
}

static void test_body_not_empty(void **state) {
        assert_false(BODY_EMPTY("{\"a\":1}"));
        assert_false(BODY_EMPTY("[]"));
        assert_false(BODY_EMPTY("null"));
        assert_false(BODY_EMPTY("\"\""));
        assert_false(BODY_EMPTY("0"));
        assert_false(BODY_EMPTY("{"));
        assert_false(BODY_EMPTY("}"));
        assert_false(BODY_EMPTY("{}}"));
        assert_false(BODY_EMPTY("{}{}"));
        assert_false(BODY_EMPTY("{} x"));
        assert_false(BODY_EMPTY("{ ,}"));
        /* Only JSON whitespace: no NUL, vertical tab, form feed or non-breaking space. */
        assert_false(BODY_EMPTY("{}\0"));
        assert_false(BODY_EMPTY("\0{}"));
        assert_false(BODY_EMPTY("{\0}"));
        assert_false(BODY_EMPTY("\v{}"));
        assert_false(BODY_EMPTY("{\f}"));
        assert_false(BODY_EMPTY("\xc2\xa0{}"));
        /* The size counts, not a NUL terminator. */
        assert_false(http_body_is_empty("{}x", 3));
        assert_true(http_body_is_empty("{}x", 2));
        assert_false(http_body_is_empty("{}", 1));
}

/* ---- http_route_match() -------------------------------------------------------------------- */

static void test_route_exact(void **state) {
        const char *params[HTTP_ROUTE_MAX_PARAMS];
        size_t lens[HTTP_ROUTE_MAX_PARAMS];

        assert_int_equal(http_route_match("/health", "/health", params, lens, HTTP_ROUTE_MAX_PARAMS), 0);
        assert_int_equal(http_route_match("/", "/", params, lens, HTTP_ROUTE_MAX_PARAMS), 0);
        assert_int_equal(http_route_match("/health", "/healthz", params, lens, HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/health", "/health/", params, lens, HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/health", "/healt", params, lens, HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/health", "/Health", params, lens, HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/health", "", params, lens, HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/health", "/", params, lens, HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/health", "//health", params, lens, HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/execute", "/execute-shell", params, lens, HTTP_ROUTE_MAX_PARAMS),
                         -ENOENT);
}

static void test_route_capture(void **state) {
        const char *params[HTTP_ROUTE_MAX_PARAMS] = {};
        size_t lens[HTTP_ROUTE_MAX_PARAMS] = {};
        const char *path;

        path = "/shell-executions/abc-1";
        assert_int_equal(http_route_match("/shell-executions/*", path, params, lens, HTTP_ROUTE_MAX_PARAMS), 1);
        assert_ptr_equal(params[0], path + strlen("/shell-executions/"));
        assert_int_equal(lens[0], 5);

        path = "/shell-executions/x/logs";
        assert_int_equal(http_route_match("/shell-executions/*/logs", path, params, lens, HTTP_ROUTE_MAX_PARAMS), 1);
        assert_ptr_equal(params[0], path + strlen("/shell-executions/"));
        assert_int_equal(lens[0], 1);

        path = "/workspaces/agent7-runner1/revisions/r42/files/main.py";
        assert_int_equal(http_route_match("/workspaces/*/revisions/*/files/*", path, params, lens,
                                          HTTP_ROUTE_MAX_PARAMS), 3);
        assert_memory_equal(params[0], "agent7-runner1", lens[0]);
        assert_int_equal(lens[0], strlen("agent7-runner1"));
        assert_memory_equal(params[1], "r42", lens[1]);
        assert_int_equal(lens[1], 3);
        assert_memory_equal(params[2], "main.py", lens[2]);
        assert_int_equal(lens[2], 7);

        /* A capture is one whole segment: it does not swallow slashes. */
        assert_int_equal(http_route_match("/workspaces/*/files", "/workspaces/a/b/files", params, lens,
                                          HTTP_ROUTE_MAX_PARAMS), -ENOENT);
}

static void test_route_refused(void **state) {
        const char *params[HTTP_ROUTE_MAX_PARAMS];
        size_t lens[HTTP_ROUTE_MAX_PARAMS];

        /* Empty segment. */
        assert_int_equal(http_route_match("/shell-executions/*", "/shell-executions/", params, lens,
                                          HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/shell-executions/*/logs", "/shell-executions//logs", params, lens,
                                          HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/shell-executions/*", "/shell-executions", params, lens,
                                          HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        /* Extra segments, trailing slash. */
        assert_int_equal(http_route_match("/shell-executions/*", "/shell-executions/a/b", params, lens,
                                          HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/shell-executions/*", "/shell-executions/a/", params, lens,
                                          HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/shell-executions/*/logs", "/shell-executions/a/logs/x", params, lens,
                                          HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        /* Missing segments. */
        assert_int_equal(http_route_match("/shell-executions/*/logs", "/shell-executions/a", params, lens,
                                          HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/shell-executions/*/logs", "/shell-executions/a/", params, lens,
                                          HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        /* Literal segments after a capture must match. */
        assert_int_equal(http_route_match("/shell-executions/*/cancel", "/shell-executions/a/logs", params, lens,
                                          HTTP_ROUTE_MAX_PARAMS), -ENOENT);
}

static void test_route_capture_limit(void **state) {
        const char *params[HTTP_ROUTE_MAX_PARAMS + 1];
        size_t lens[HTTP_ROUTE_MAX_PARAMS + 1];

        assert_int_equal(HTTP_ROUTE_MAX_PARAMS, 4);
        /* As many captures as allowed. */
        assert_int_equal(http_route_match("/*/*/*/*", "/a/b/c/d", params, lens, HTTP_ROUTE_MAX_PARAMS), 4);
        assert_memory_equal(params[3], "d", lens[3]);
        /* One more than @max: refused rather than written past the arrays. */
        assert_int_equal(http_route_match("/*/*/*/*/*", "/a/b/c/d/e", params, lens, HTTP_ROUTE_MAX_PARAMS), -ENOENT);
        assert_int_equal(http_route_match("/*/*", "/a/b", params, lens, 1), -ENOENT);
        assert_int_equal(http_route_match("/x/*", "/x/a", NULL, NULL, 0), -ENOENT);
        /* No capture needs no arrays. */
        assert_int_equal(http_route_match("/status", "/status", NULL, NULL, 0), 0);
        /* A larger @max is honoured. */
        assert_int_equal(http_route_match("/*/*/*/*/*", "/a/b/c/d/e", params, lens, HTTP_ROUTE_MAX_PARAMS + 1), 5);
        assert_memory_equal(params[4], "e", lens[4]);
}

/* Route with a "<ref>" segment: its captures as "ref|rest" (rest empty when there is none). */
static int match_ref(const char *pattern, const char *path, char *buf, size_t size) {
        const char *params[HTTP_ROUTE_MAX_PARAMS] = {};
        size_t lens[HTTP_ROUTE_MAX_PARAMS] = {};
        int r;

        r = http_route_match(pattern, path, params, lens, HTTP_ROUTE_MAX_PARAMS);
        if (r < 0)
                return r;
        assert_true(r >= 2);
        assert_memory_equal(params[0], "w", lens[0]);
        (void) snprintf(buf, size, "%.*s|%.*s", (int) lens[1], params[1], r > 2 ? (int) lens[2] : 0,
                        r > 2 ? params[2] : "");
        return r;
}

static void test_route_ref(void **state) {
        static const char *const files = "/workspaces/*/revisions/<ref>/files/**";
        static const char *const list = "/workspaces/*/revisions/<ref>/files";
        static const char *const tree = "/workspaces/*/revisions/<ref>/tree";
        char buf[256];

        /* The id alone, as before. */
        assert_int_equal(match_ref(files, "/workspaces/w/revisions/abc/files/dir/a.txt", buf, sizeof(buf)), 3);
        assert_string_equal(buf, "abc|dir/a.txt");
        assert_int_equal(match_ref(tree, "/workspaces/w/revisions/abc/tree", buf, sizeof(buf)), 2);
        assert_string_equal(buf, "abc|");
        assert_int_equal(match_ref(list, "/workspaces/w/revisions/abc/files", buf, sizeof(buf)), 2);
        assert_string_equal(buf, "abc|");

        /* The listed ref with its slashes: one capture, the file path after it. */
        assert_int_equal(match_ref(files, "/workspaces/w/revisions/workspace/w/abc/files/dir/a.txt", buf,
                                   sizeof(buf)), 3);
        assert_string_equal(buf, "workspace/w/abc|dir/a.txt");
        assert_int_equal(match_ref(files, "/workspaces/w/revisions/workspace/w/abc/files/files/x", buf,
                                   sizeof(buf)), 3);
        assert_string_equal(buf, "workspace/w/abc|files/x");
        assert_int_equal(match_ref(tree, "/workspaces/w/revisions/workspace/w/abc/tree", buf, sizeof(buf)), 2);
        assert_string_equal(buf, "workspace/w/abc|");
        assert_int_equal(match_ref(list, "/workspaces/w/revisions/workspace/w/abc/files", buf, sizeof(buf)), 2);
        assert_string_equal(buf, "workspace/w/abc|");
        /* Another workspace's ref is captured too (the handler refuses it). */
        assert_int_equal(match_ref(files, "/workspaces/w/revisions/workspace/other/abc/files/a", buf,
                                   sizeof(buf)), 3);
        assert_string_equal(buf, "workspace/other/abc|a");
        /* An execution id "tree" or "files" inside the listed form. */
        assert_int_equal(match_ref(tree, "/workspaces/w/revisions/workspace/w/tree/tree", buf, sizeof(buf)), 2);
        assert_string_equal(buf, "workspace/w/tree|");
        assert_int_equal(match_ref(files, "/workspaces/w/revisions/workspace/w/files/files/files", buf,
                                   sizeof(buf)), 3);
        assert_string_equal(buf, "workspace/w/files|files");

        /* An execution id "workspace": the listed form is tried first, the id where it cannot be. */
        assert_int_equal(match_ref(files, "/workspaces/w/revisions/workspace/files/a/b", buf, sizeof(buf)), 3);
        assert_string_equal(buf, "workspace|a/b");
        assert_int_equal(match_ref(tree, "/workspaces/w/revisions/workspace/tree", buf, sizeof(buf)), 2);
        assert_string_equal(buf, "workspace|");
        assert_int_equal(match_ref(list, "/workspaces/w/revisions/workspace/files", buf, sizeof(buf)), 2);
        assert_string_equal(buf, "workspace|");
        assert_int_equal(match_ref(files, "/workspaces/w/revisions/workspace/files/x/files/y", buf, sizeof(buf)), 3);
        assert_string_equal(buf, "workspace/files/x|y");

        /* Not a ref: empty segments, missing parts, nothing after it. */
        assert_int_equal(match_ref(files, "/workspaces/w/revisions//files/a", buf, sizeof(buf)), -ENOENT);
        assert_int_equal(match_ref(files, "/workspaces/w/revisions/workspace//abc/files/a", buf, sizeof(buf)),
                         -ENOENT);
        assert_int_equal(match_ref(files, "/workspaces/w/revisions/workspace/w//files/a", buf, sizeof(buf)),
                         -ENOENT);
        assert_int_equal(match_ref(files, "/workspaces/w/revisions/workspace/w/abc/files/", buf, sizeof(buf)),
                         -ENOENT);
        assert_int_equal(match_ref(files, "/workspaces/w/revisions/workspace/w/abc/x/files/a", buf, sizeof(buf)),
                         -ENOENT);
        assert_int_equal(match_ref(tree, "/workspaces/w/revisions/workspace/w/abc", buf, sizeof(buf)), -ENOENT);
        assert_int_equal(match_ref(tree, "/workspaces/w/revisions/workspace/w/abc/tree/", buf, sizeof(buf)), -ENOENT);
        assert_int_equal(match_ref(list, "/workspaces/w/revisions/workspace/w/abc/files/", buf, sizeof(buf)),
                         -ENOENT);
        /* The capture limit holds for "<ref>" too. */
        assert_int_equal(http_route_match("/<ref>", "/workspace/w/a", NULL, NULL, 0), -ENOENT);
        assert_int_equal(http_route_match("/*/<ref>", "/x/workspace/w/a", (const char *[1]) {}, (size_t[1]) {}, 1),
                         -ENOENT);
}

#define REF(lit, ws, id) http_revision_ref_parse(lit, strlen(lit), ws, id)

static void test_revision_ref_parse(void **state) {
        char id[129];

        assert_int_equal(REF("abc", "w", id), 0);
        assert_string_equal(id, "abc");
        assert_int_equal(REF("workspace/w/abc", "w", id), 0);
        assert_string_equal(id, "abc");
        assert_int_equal(REF("workspace/agent7-runner1/ex-0040", "agent7-runner1", id), 0);
        assert_string_equal(id, "ex-0040");
        /* An execution id "workspace" alone, and as a full ref. */
        assert_int_equal(REF("workspace", "w", id), 0);
        assert_string_equal(id, "workspace");
        assert_int_equal(REF("workspace/w/workspace", "w", id), 0);
        assert_string_equal(id, "workspace");
        /* Only @len bytes count. */
        assert_int_equal(http_revision_ref_parse("workspace/w/abc/files/x", 15, "w", id), 0);
        assert_string_equal(id, "abc");

        /* Another workspace: refused by name, also a prefix or an extension of @ws. */
        assert_int_equal(REF("workspace/other/abc", "w", id), -EXDEV);
        assert_int_equal(REF("workspace/ww/abc", "w", id), -EXDEV);
        assert_int_equal(REF("workspace/w/abc", "ww", id), -EXDEV);
        assert_int_equal(REF("workspace/W/abc", "w", id), -EXDEV);
        assert_int_equal(REF("workspace/.bad/abc", "w", id), -EXDEV);

        /* Malformed. */
        assert_int_equal(REF("", "w", id), -EINVAL);
        assert_int_equal(REF("workspace/", "w", id), -EINVAL);
        assert_int_equal(REF("workspace/w", "w", id), -EINVAL);
        assert_int_equal(REF("workspace/w/", "w", id), -EINVAL);
        assert_int_equal(REF("workspace//abc", "w", id), -EINVAL);
        assert_int_equal(REF("workspace/w/abc/def", "w", id), -EINVAL);
        assert_int_equal(REF("workspace/w/.abc", "w", id), -EINVAL);
        assert_int_equal(REF("workspace/w/a b", "w", id), -EINVAL);
        assert_int_equal(REF("Workspace/w/abc", "w", id), -EINVAL);
        assert_int_equal(REF("abc/def", "w", id), -EINVAL);
        assert_int_equal(REF(".abc", "w", id), -EINVAL);
        assert_int_equal(REF("..", "w", id), -EINVAL);
        assert_int_equal(http_revision_ref_parse("ab\0c", 4, "w", id), -EINVAL);
        assert_int_equal(http_revision_ref_parse("workspace/w/ab\0c", 16, "w", id), -EINVAL);
        {
                char long_id[200];

                memset(long_id, 'a', 128);
                long_id[128] = '\0';
                assert_int_equal(REF(long_id, "w", id), 0);
                assert_int_equal(strlen(id), 128);
                long_id[128] = 'a';
                long_id[129] = '\0';
                assert_int_equal(REF(long_id, "w", id), -EINVAL);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_error_json_simple),
                cmocka_unit_test(test_error_json_control),
                cmocka_unit_test(test_error_json_quotes),
                cmocka_unit_test(test_error_json_invalid_utf8),
                cmocka_unit_test(test_status_from_errno),
                cmocka_unit_test(test_json_valid),
                cmocka_unit_test(test_json_not_an_object),
                cmocka_unit_test(test_json_syntax),
                cmocka_unit_test(test_json_strictness),
                cmocka_unit_test(test_json_trailing_nul),
                cmocka_unit_test(test_json_numbers),
                cmocka_unit_test(test_json_depth),
                cmocka_unit_test(test_json_strings),
                cmocka_unit_test(test_json_utf8_strict),
                cmocka_unit_test(test_body_empty),
                cmocka_unit_test(test_body_not_empty),
                cmocka_unit_test(test_route_exact),
                cmocka_unit_test(test_route_capture),
                cmocka_unit_test(test_route_refused),
                cmocka_unit_test(test_route_capture_limit),
                cmocka_unit_test(test_route_ref),
                cmocka_unit_test(test_revision_ref_parse),
        };

        return cmocka_run_group_tests_name("http-api", tests, NULL, NULL);
}
