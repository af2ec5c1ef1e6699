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

/* sandboxEgressProxy.mode: the upstream route of the run's gateway. */
typedef enum SdpProxyMode {
        SDP_PROXY_DIRECT,               /* absent, null or "direct": the gateway dials itself */
        SDP_PROXY_ENVIRONMENT,          /* the daemon's own https_proxy/http_proxy, no_proxy */
        SDP_PROXY_URL,                  /* @proxy_url */
} SdpProxyMode;

typedef struct SdpNetwork {
        bool allowlist;                 /* a network granted (domain-allowlist or open): mode == networkPolicy */
        bool open;                      /* ... and it is open: any public destination */
        SdpProxyMode proxy;
        const char *proxy_url;          /* SDP_PROXY_URL: validated by egress_upstream_parse(), in the body */
        bool private_network;           /* allowPrivateNetwork: the operator's [Network] Mirrors= apply */
        json_object *domains;           /* allowedDomains: an array of strings (in the body), or NULL */
        const char *revision;           /* networkAccess.revision; "none" without network, NULL: not sent */
} SdpNetwork;

/*
 * sdp_network_parse() - the effective network of a run from its permission @epoch: their rule
 * is that networkAccess counts only when its mode equals networkPolicy; anything else (absent,
 * another mode) is no network. Entries are not checked here (the egress policy does that).
 * In mode open, allowedDomains is ignored (any public destination) and allowPrivateNetwork
 * counts as for an allowlist. Whether the operator serves open is checked later (configuration).
 * Return: 0; -EINVAL with *ret_error (static) for a malformed field.
 */
int sdp_network_parse(json_object *epoch, SdpNetwork *ret, const char **ret_error);

/*
 * sdp_proxy_parse() - the request's sandboxEgressProxy (@v: NULL or JSON null = direct) into
 * @n's proxy fields: {mode:"direct"}, {mode:"environment"} or {mode:"url", url:"http://host:port"}
 * (checked with egress_upstream_parse(); the reason never quotes the URL, which may hold
 * credentials). Return: 0, or -EINVAL with a static *ret_error.
 */
int sdp_proxy_parse(json_object *v, SdpNetwork *n, const char **ret_error);

/*
 * sdp_proxy_from_environment() - the upstream of mode environment from @getenv_fn (getenv()):
 * the first set of https_proxy, HTTPS_PROXY, http_proxy, HTTP_PROXY (one upstream for tunnels
 * and plain HTTP alike), and no_proxy or NO_PROXY. *ret_url NULL: none set, direct.
 * Return: 0, or -EINVAL (a value that egress_upstream_parse() refuses, a no_proxy over 4096
 * characters or with a line break) with a static *ret_error.
 */
int sdp_proxy_from_environment(const char *(*getenv_fn)(const char *name), const char **ret_url,
                               const char **ret_no_proxy, const char **ret_error);
