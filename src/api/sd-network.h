/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The per-request network policy of the ScienceDiscovery dialect (notes §12): a run's
 * permissionEpoch.networkPolicy and .networkAccess read into what our egress gateway can do (an
 * allowlist of its own, or nothing). Pure.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

/* Their modes, as /health's sandboxNetwork.modes lists those this runner serves. */
#define SDP_NETWORK_NONE "none"
#define SDP_NETWORK_ALLOWLIST "domain-allowlist"
#define SDP_NETWORK_OPEN "open"

typedef struct SdpNetwork {
        bool allowlist;                 /* domain-allowlist granted: networkAccess.mode == networkPolicy */
        bool private_network;           /* allowPrivateNetwork: the operator's [Network] Mirrors= apply */
        json_object *domains;           /* allowedDomains: an array of strings (in the body), or NULL */
        const char *revision;           /* networkAccess.revision; "none" without network, NULL: not sent */
} SdpNetwork;

/*
 * sdp_network_parse() - the effective network of a run from its permission @epoch: their rule
 * is that networkAccess counts only when its mode equals networkPolicy; anything else (absent,
 * another mode) is no network. Entries are not checked here (the egress policy does that).
 * Return: 0; -EINVAL with *ret_error (static) for a malformed field; -EOPNOTSUPP with *ret_error
 * for the mode "open", which this runner does not serve (its gateway only allow-lists).
 */
int sdp_network_parse(json_object *epoch, SdpNetwork *ret, const char **ret_error);
