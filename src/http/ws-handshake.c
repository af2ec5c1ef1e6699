/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The WebSocket opening handshake, server side (ws-handshake.h). Pure; nettle for SHA-1 and base64. */

#include <errno.h>
#include <nettle/base64.h>
#include <nettle/sha1.h>
#include <string.h>
#include <strings.h>

#include "http/ws-handshake.h"
#include "util/macro.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

bool ws_header_has_token(const char *value, const char *token) {
        size_t tl = strlen(token);

        if (!value)
                return false;
        for (const char *p = value; *p;) {
                const char *e;
                size_t l;

                p += strspn(p, " \t,");
                e = p + strcspn(p, ",");
                l = (size_t) (e - p);
                while (l > 0 && (p[l - 1] == ' ' || p[l - 1] == '\t'))
                        l--;
                if (l == tl && strncasecmp(p, token, tl) == 0)
                        return true;
                p = e;
        }
        return false;
}

void ws_accept_compute(const char *key, char ret_accept[static WS_ACCEPT_SIZE]) {
        uint8_t digest[SHA1_DIGEST_SIZE];
        struct sha1_ctx ctx;

        sha1_init(&ctx);
        sha1_update(&ctx, strlen(key), (const uint8_t *) key);
        sha1_update(&ctx, strlen(WS_GUID), (const uint8_t *) WS_GUID);
        sha1_digest(&ctx, sizeof(digest), digest);
        base64_encode_raw((char *) ret_accept, sizeof(digest), digest);
        ret_accept[BASE64_ENCODE_RAW_LENGTH(SHA1_DIGEST_SIZE)] = '\0';
}

/* A key is the base64 of 16 bytes: 24 characters, the last two "==". */
static bool key_valid(const char *key) {
        struct base64_decode_ctx ctx;
        uint8_t out[BASE64_DECODE_LENGTH(24)];
        size_t n = sizeof(out);

        if (!key || strlen(key) != 24 || !streq(key + 22, "=="))
                return false;
        base64_decode_init(&ctx);
        if (!base64_decode_update(&ctx, &n, out, 24, key) || !base64_decode_final(&ctx))
                return false;
        return n == 16;
}

int ws_handshake_check(const WsHandshakeRequest *h, char ret_accept[static WS_ACCEPT_SIZE], const char **ret_why) {
        if (!h->method || !streq(h->method, "GET")) {
                *ret_why = "A WebSocket is opened with GET.";
                return -EBADMSG;
        }
        if (!ws_header_has_token(h->upgrade, "websocket")) {
                *ret_why = "This endpoint is a WebSocket: the request needs \"Upgrade: websocket\".";
                return -EBADMSG;
        }
        if (!ws_header_has_token(h->connection, "upgrade")) {
                *ret_why = "This endpoint is a WebSocket: the request needs \"Connection: Upgrade\".";
                return -EBADMSG;
        }
        if (!h->version) {
                *ret_why = "The request needs \"Sec-WebSocket-Version: 13\".";
                return -EBADMSG;
        }
        if (!streq(h->version, "13")) {
                *ret_why = "Only WebSocket version 13 (RFC 6455) is spoken here.";
                return -EPROTONOSUPPORT;
        }
        if (!key_valid(h->key)) {
                *ret_why = "Sec-WebSocket-Key must be the base64 encoding of 16 bytes.";
                return -EBADMSG;
        }
        ws_accept_compute(h->key, ret_accept);
        return 0;
}
