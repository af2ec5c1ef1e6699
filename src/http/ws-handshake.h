/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The server's side of the WebSocket opening handshake (RFC 6455 section 4.2): is a request one,
 * its Sec-WebSocket-Accept, and whether the client offered a subprotocol. Pure: header values in,
 * answers out (nettle's SHA-1 and base64).
 */
#pragma once

#include <stdbool.h>

/* The header values of a request (NULL: absent). */
typedef struct WsHandshakeRequest {
        const char *method;
        const char *upgrade;            /* Upgrade: */
        const char *connection;         /* Connection: */
        const char *version;            /* Sec-WebSocket-Version: */
        const char *key;                /* Sec-WebSocket-Key: */
} WsHandshakeRequest;

#define WS_ACCEPT_SIZE 29               /* base64 of a SHA-1 digest, and a NUL */

/*
 * ws_handshake_check() - a GET with "Upgrade: websocket", "Connection: upgrade" (among its
 * tokens, case-insensitive), "Sec-WebSocket-Version: 13" and a key that is the base64 of 16 bytes.
 * Return: 0 with the Sec-WebSocket-Accept value in @ret_accept; -EBADMSG with *@ret_why (a static
 * explanation for the 400); -EPROTONOSUPPORT for another version (426, answered with
 * "Sec-WebSocket-Version: 13").
 */
int ws_handshake_check(const WsHandshakeRequest *h, char ret_accept[static WS_ACCEPT_SIZE], const char **ret_why);

/* ws_accept_compute() - base64(SHA-1(@key "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")). */
void ws_accept_compute(const char *key, char ret_accept[static WS_ACCEPT_SIZE]);

/* ws_header_has_token() - whether the comma-separated list @value holds @token (case-insensitive,
 * optional white space around each element). */
bool ws_header_has_token(const char *value, const char *token);
