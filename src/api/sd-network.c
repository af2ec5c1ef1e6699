/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's per-request network policy: their permission epoch read
 * (sdp_network_parse(), pure) and mapped onto a gateway instance of that allowlist's own
 * (egress_epoch_acquire_for(): one per policy revision, shared by runs with the same list), and
 * /health's sandboxNetwork. A run of this dialect never uses the policy in force on our own API.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/sd-internal.h"
#include "api/sd-network.h"
#include "core/manager.h"
#include "execution/execution.h"
#include "http/http-server.h"
#include "egress/egress-epochs.h"
#include "egress/egress-policy.h"
#include "util/macro.h"
#include "util/strv.h"
#include "util/string-util.h"

static int get_optional_string(json_object *o, const char *key, const char **ret) {
        json_object *v;

        *ret = NULL;
        if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return -EINVAL;
        *ret = json_object_get_string(v);
        return 0;
}

int sdp_network_parse(json_object *epoch, SdpNetwork *ret, const char **ret_error) {
        SdpNetwork n = { .revision = SDP_NETWORK_NONE };
        const char *policy, *mode, *revision;
        json_object *access, *v;

        if (get_optional_string(epoch, "networkPolicy", &policy) < 0 ||
            (policy && !streq(policy, SDP_NETWORK_NONE) && !streq(policy, SDP_NETWORK_ALLOWLIST) &&
             !streq(policy, SDP_NETWORK_OPEN))) {
                *ret_error = "permissionEpoch.networkPolicy must be none, domain-allowlist or open";
                return -EINVAL;
        }
        if (!json_object_object_get_ex(epoch, "networkAccess", &access) ||
            json_object_is_type(access, json_type_null)) {
                *ret = n;
                return 0;
        }
        if (!json_object_is_type(access, json_type_object)) {
                *ret_error = "permissionEpoch.networkAccess must be an object";
                return -EINVAL;
        }
        if (get_optional_string(access, "mode", &mode) < 0 || !mode) {
                *ret_error = "permissionEpoch.networkAccess.mode must be a string";
                return -EINVAL;
        }
        /* Their rule (epochSandboxNetworkAccess): a mode other than the policy's is no network. */
        if (!policy || !streq(mode, policy) || streq(mode, SDP_NETWORK_NONE)) {
                *ret = n;
                return 0;
        }
        n.open = streq(mode, SDP_NETWORK_OPEN);

        /* Mode open: any public destination, whatever the list says. */
        if (!n.open && json_object_object_get_ex(access, "allowedDomains", &v) &&
            !json_object_is_type(v, json_type_null)) {
                if (!json_object_is_type(v, json_type_array)) {
                        *ret_error = "permissionEpoch.networkAccess.allowedDomains must be an array of strings";
                        return -EINVAL;
                }
                for (size_t i = 0; i < json_object_array_length(v); i++)
                        if (!json_object_is_type(json_object_array_get_idx(v, i), json_type_string)) {
                                *ret_error = "permissionEpoch.networkAccess.allowedDomains must be an array of strings";
                                return -EINVAL;
                        }
                if (json_object_array_length(v) > EGRESS_POLICY_ALLOW_MAX) {
                        *ret_error = "permissionEpoch.networkAccess.allowedDomains has too many entries";
                        return -EINVAL;
                }
                n.domains = v;
        }
        if (json_object_object_get_ex(access, "allowPrivateNetwork", &v) && !json_object_is_type(v, json_type_null)) {
                if (!json_object_is_type(v, json_type_boolean)) {
                        *ret_error = "permissionEpoch.networkAccess.allowPrivateNetwork must be a boolean";
                        return -EINVAL;
                }
                n.private_network = json_object_get_boolean(v);
        }
        if (get_optional_string(access, "revision", &revision) < 0 || (revision && strlen(revision) > 256)) {
                *ret_error = "permissionEpoch.networkAccess.revision must be a string of at most 256 characters";
                return -EINVAL;
        }
        n.revision = revision;
        n.allowlist = true;
        *ret = n;
        return 0;
}

int sdp_proxy_parse(json_object *v, SdpNetwork *n, const char **ret_error) {
        json_object *mode, *url;
        const char *s = NULL, *why = NULL;
        _cleanup_(egress_upstream_done) EgressUpstream u = {};

        n->proxy = SDP_PROXY_DIRECT;
        n->proxy_url = NULL;
        if (!v || json_object_is_type(v, json_type_null))
                return 0;
        if (json_object_is_type(v, json_type_object) && json_object_object_get_ex(v, "mode", &mode) &&
            json_object_is_type(mode, json_type_string))
                s = json_object_get_string(mode);
        if (s && streq(s, "direct"))
                return 0;
        if (s && streq(s, "environment")) {
                n->proxy = SDP_PROXY_ENVIRONMENT;
                return 0;
        }
        if (!s || !streq(s, "url")) {
                *ret_error = "sandboxEgressProxy.mode must be direct, environment or url";
                return -EINVAL;
        }
        if (!json_object_object_get_ex(v, "url", &url) || !json_object_is_type(url, json_type_string) ||
            strlen(json_object_get_string(url)) != (size_t) json_object_get_string_len(url)) {
                *ret_error = "sandboxEgressProxy.url must be a string (http://host:port)";
                return -EINVAL;
        }
        if (egress_upstream_parse(json_object_get_string(url), &u, &why) < 0) {
                *ret_error = why ?: "sandboxEgressProxy.url is not a valid proxy URL";
                return -EINVAL;
        }
        n->proxy = SDP_PROXY_URL;
        n->proxy_url = json_object_get_string(url);
        return 0;
}

int sdp_proxy_from_environment(const char *(*getenv_fn)(const char *name), const char **ret_url,
                               const char **ret_no_proxy, const char **ret_error) {
        static const char *const proxy_vars[] = { "https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY" };
        _cleanup_(egress_upstream_done) EgressUpstream u = {};
        const char *url = NULL, *no_proxy;

        for (size_t i = 0; i < ELEMENTSOF(proxy_vars) && !url; i++)
                if (!isempty(getenv_fn(proxy_vars[i])))
                        url = getenv_fn(proxy_vars[i]);
        no_proxy = getenv_fn("no_proxy");
        if (isempty(no_proxy))
                no_proxy = getenv_fn("NO_PROXY");
        if (url && egress_upstream_parse(url, &u, ret_error) < 0)
                return -EINVAL;
        /* The policy's limits (egress_policy_new_full()): blamed on the environment, not the request. */
        if (no_proxy && (strlen(no_proxy) > 4096 || strpbrk(no_proxy, "\r\n"))) {
                *ret_error = "no_proxy is over 4096 characters or holds a line break";
                return -EINVAL;
        }
        *ret_url = url;
        *ret_no_proxy = isempty(no_proxy) ? NULL : no_proxy;
        return 0;
}

static const char *real_getenv(const char *name) {
        return getenv(name);
}

int sdp_network_acquire(Manager *m, const SdpNetwork *n, EgressEpoch **ret, char **ret_error) {
        _cleanup_strv_free_ char **allow = NULL;
        _cleanup_(egress_upstream_done) EgressUpstream u = {};
        const char *url = NULL, *no_proxy = NULL, *why = NULL;
        size_t k = n->domains && !n->open ? json_object_array_length(n->domains) : 0;
        int r;

        *ret = NULL;
        if (!n->allowlist)
                return 0;
        if (n->proxy == SDP_PROXY_URL)
                url = n->proxy_url;
        else if (n->proxy == SDP_PROXY_ENVIRONMENT &&
                 sdp_proxy_from_environment(real_getenv, &url, &no_proxy, &why) < 0)
                return asprintf(ret_error, "the daemon's environment names an upstream proxy it cannot use: %s",
                                why) < 0 ? -ENOMEM : -EOPNOTSUPP;
        if (url) {
                r = egress_upstream_parse(url, &u, &why);
                if (r < 0)
                        return r == -ENOMEM ? r : -EOPNOTSUPP;  /* checked before: cannot happen */
        }
        allow = calloc(k + 1, sizeof(char *));
        if (!allow)
                return -ENOMEM;
        for (size_t i = 0; i < k; i++) {
                allow[i] = strdup(json_object_get_string(json_object_array_get_idx(n->domains, i)));
                if (!allow[i])
                        return -ENOMEM;
        }
        /* Private addresses: only the ranges the operator made acceptable ([Network] Mirrors=),
         * never the whole private space on a request's word. */
        return egress_epoch_acquire_route(m->egress, n->open, allow,
                                          n->private_network ? m->config.network_mirrors : NULL,
                                          url ? &u : NULL, no_proxy, ret, ret_error);
}

json_object *sdp_network_health(Manager *m) {
        json_object *o = json_object_new_object(), *modes = json_object_new_array();
        const char *reason = NULL;
        bool available = m->egress && egress_available(m->egress, &reason);

        if (!o || !modes) {
                json_object_put(o);
                json_object_put(modes);
                return NULL;
        }
        json_object_array_add(modes, json_object_new_string(SDP_NETWORK_NONE));
        if (available)
                json_object_array_add(modes, json_object_new_string(SDP_NETWORK_ALLOWLIST));
        if (available && m->config.network_open)
                json_object_array_add(modes, json_object_new_string(SDP_NETWORK_OPEN));
        json_object_object_add(o, "available", json_object_new_boolean(available));
        json_object_object_add(o, "modes", modes);
        if (!available)
                json_object_object_add(o, "unavailableReason", json_object_new_string(
                                               reason ?: "the egress gateway is not set up"));
        return o;
}

bool sdp_network_prepare(Manager *m, HttpRequest *req, const SdpRequest *p, EgressEpoch **ret) {
        _cleanup_free_ char *error = NULL;
        int r;

        if (p->net.open && !m->config.network_open) {
                sdp_reply_error(req, 400, "Sandbox network mode open is not available on this runner: its operator "
                                "turned it off ([Network] OpenMode=no); use domain-allowlist");
                return false;
        }
        r = sdp_network_acquire(m, &p->net, ret, &error);
        if (r == -ENOMEM) {
                sdp_reply_error(req, 500, "Out of memory");
                return false;
        }
        if (r == -EINVAL) {
                sdp_reply_error(req, 400, "permissionEpoch.networkAccess.allowedDomains: %s", error ?: "invalid");
                return false;
        }
        if (r < 0) {
                /* Fail closed: no bridge, no run (their prepareSandboxEgress). */
                sdp_reply_error(req, 503, "Sandbox network access is unavailable: %s", error ?: strerror(-r));
                return false;
        }
        return true;
}

bool sdp_network_check(HttpRequest *req, json_object *body, json_object *epoch, SdpNetwork *ret) {
        const char *why = NULL;
        json_object *v = NULL;

        if (sdp_network_parse(epoch, ret, &why) < 0) {
                sdp_reply_error(req, 400, "%s", why);
                return false;
        }
        /* Their upstream route of the gateway, checked even when the run has no network. */
        (void) json_object_object_get_ex(body, "sandboxEgressProxy", &v);
        if (sdp_proxy_parse(v, ret, &why) < 0) {
                sdp_reply_error(req, 400, "%s", why);
                return false;
        }
        return true;
}
