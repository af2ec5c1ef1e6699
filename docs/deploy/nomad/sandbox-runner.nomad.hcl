# SPDX-License-Identifier: LGPL-2.1-or-later
# sandbox-runner on a Nomad cluster (docs/deploy/README.md): a system job, one allocation per
# eligible client node, that configures and supervises the host's sandbox-runner.service (the
# .deb in the node image, as in docs/deploy/kubernetes/host). It does not run the daemon:
# systemd does, with socket activation, scopes, journald and polkit as on a single host.
#
# The task is the node agent of the Kubernetes variant, the same script (the test
# tests/integration/fleet-manifests.py checks the two are equal): every 10 s it writes
# /etc/sandbox-runner/runner.conf.d/50-fleet.conf ([Fleet] Enable=yes, NodeId= the node's name,
# AdvertiseURL= its address, Etcd= from var.etcd) and asks systemd over D-Bus (busctl) to reload
# the runner when the file changed (it finishes its runs first) or to start it when it is not
# running.
#
# Cost, plainly: raw_exec has no isolation at all; the task runs as the Nomad client's user, root
# on the node (E2B runs its per-node orchestrator the same way). It needs root for two things:
# the drop-in directory is root's, and systemd lets root manage units. raw_exec must be enabled
# in each client's configuration:
#   plugin "raw_exec" { config { enabled = true } }
# and the nodes that have the .deb marked in their client configuration:
#   client { meta { sandbox_runner = "host" } }
#
#   nomad job run -var 'etcd=http://10.0.0.11:2379 http://10.0.0.12:2379 http://10.0.0.13:2379' \
#     docs/deploy/nomad/sandbox-runner.nomad.hcl

variable "etcd" {
  type        = string
  description = "[Fleet] Etcd=: etcd's client URLs, space-separated (required)"
}

variable "etcd_prefix" {
  type        = string
  description = "[Fleet] EtcdPrefix="
  default     = "/sandbox-runner/"
}

variable "fleet_port" {
  type        = string
  description = "the port of AdvertiseURL=http://<the node's address>:<port>"
  default     = "4313"
}

variable "lease_ttl" {
  type        = string
  description = "[Fleet] LeaseTTLSec="
  default     = "10s"
}

job "sandbox-runner-node-agent" {
  # One allocation on every eligible client, placed again on clients that join.
  type        = "system"
  # Every datacenter (the wildcard needs Nomad >= 1.5; list yours on older ones).
  datacenters = ["*"]

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  # Only the nodes whose image has the .deb (see above).
  constraint {
    attribute = "${meta.sandbox_runner}"
    value     = "host"
  }

  group "node-agent" {
    # The script loops; when it exits (a bad setting: status 78) Nomad starts it again, slowly.
    restart {
      attempts = 3
      interval = "5m"
      delay    = "30s"
      mode     = "delay"
    }

    task "node-agent" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["${NOMAD_TASK_DIR}/node-agent.sh"]
      }

      env {
        NODE_NAME         = "${node.unique.name}"
        HOST_IP           = "${attr.unique.network.ip-address}"
        FLEET_ETCD        = var.etcd
        FLEET_ETCD_PREFIX = var.etcd_prefix
        FLEET_PORT        = var.fleet_port
        FLEET_LEASE_TTL   = var.lease_ttl
        DROPIN_DIR        = "/etc/sandbox-runner/runner.conf.d"
      }

      # The script (no HCL interpolation and no template action in it: it contains neither
      # "${", "%{" nor "{{", which the test checks).
      template {
        destination = "local/node-agent.sh"
        perms       = "0755"
        data        = <<-EOT
        #!/bin/sh
        # The sandbox-runner node agent (docs/deploy/README.md): keeps this node's host runner,
        # sandbox-runner.service from the .deb, configured for the fleet and running. Each pass renders
        # the drop-in 50-fleet.conf from the environment, replaces the file when it differs (a hidden
        # temporary file in the same directory, then a rename: the daemon skips names that start with
        # "."), and asks systemd over the D-Bus system bus (busctl; no /run/systemd needed) to apply it:
        # ReloadUnit while the runner is active (it finishes its runs and exits: no run is interrupted),
        # StartUnit while it is not (a fleet node must run to hold its lease in etcd; socket activation
        # alone would wait for a first client). The same text is the ConfigMap's node-agent.sh in
        # docs/deploy/kubernetes/host/configmap.yaml and the template of
        # docs/deploy/nomad/sandbox-runner.nomad.hcl (tests/integration/fleet-manifests.py checks that
        # they are equal and runs it against a fake busctl).
        #
        # Environment: NODE_NAME, HOST_IP, FLEET_ETCD (etcd client URLs, space-separated) are required;
        # FLEET_PORT (default 4313), FLEET_ETCD_PREFIX, FLEET_LEASE_TTL, FLEET_ETCD_CA_FILE,
        # FLEET_ETCD_CERT_FILE, FLEET_ETCD_KEY_FILE (host paths) are optional. DROPIN_DIR (default
        # /etc/sandbox-runner/runner.conf.d), AGENT_INTERVAL (seconds between passes, default 10),
        # AGENT_ONCE=1 (one pass, exit with its status), AGENT_READY_FILE (exists while the runner is
        # active with this drop-in), BUSCTL (default busctl).
        set -f

        UNIT=sandbox-runner.service
        UNIT_PATH=/org/freedesktop/systemd1/unit/sandbox_2drunner_2eservice

        log() { echo "node-agent: $*" >&2; }
        die() { log "$*"; exit 78; }

        [ -n "$DROPIN_DIR" ] || DROPIN_DIR=/etc/sandbox-runner/runner.conf.d
        [ -n "$AGENT_INTERVAL" ] || AGENT_INTERVAL=10
        [ -n "$BUSCTL" ] || BUSCTL=busctl
        [ -n "$FLEET_PORT" ] || FLEET_PORT=4313

        # One word of the characters a host name, an address, a URL or a path needs: nothing that could
        # end a line of the drop-in or start a second key.
        word() {
                case $2 in
                "" | *[!]A-Za-z0-9._:/@%+=,~[-]*) die "$1 must be one word of [A-Za-z0-9._:/@%+=,~[]-], not '$2'" ;;
                esac
        }

        [ -n "$NODE_NAME" ] || die "NODE_NAME is not set (the node's name: spec.nodeName, node.unique.name)"
        [ -n "$HOST_IP" ] || die "HOST_IP is not set (the node's address: status.hostIP, attr.unique.network.ip-address)"
        [ -n "$FLEET_ETCD" ] || die "FLEET_ETCD is not set (etcd's client URLs, space-separated)"
        word NODE_NAME "$NODE_NAME"
        case $HOST_IP in
        *[!0-9A-Fa-f.:]*) die "HOST_IP must be an IPv4 or IPv6 address, not '$HOST_IP'" ;;
        *:*) host="[$HOST_IP]" ;;
        *) host=$HOST_IP ;;
        esac
        case $FLEET_PORT in
        "" | *[!0-9]*) die "FLEET_PORT must be a port number, not '$FLEET_PORT'" ;;
        esac
        etcd=
        for url in $FLEET_ETCD; do
                word FLEET_ETCD "$url"
                case $url in
                http://?* | https://?*) ;;
                *) die "FLEET_ETCD: '$url' is not an http:// or https:// URL" ;;
                esac
                if [ -z "$etcd" ]; then etcd=$url; else etcd="$etcd $url"; fi
        done
        for v in FLEET_ETCD_PREFIX FLEET_LEASE_TTL FLEET_ETCD_CA_FILE FLEET_ETCD_CERT_FILE FLEET_ETCD_KEY_FILE; do
                eval "val=\$$v"
                [ -z "$val" ] || word "$v" "$val"
        done

        render() {
                echo "# Written by the sandbox-runner node agent for node $NODE_NAME (docs/deploy/README.md)."
                echo "# Its next pass replaces any change made here: change the agent's settings instead."
                echo "[Fleet]"
                echo "Enable=yes"
                echo "NodeId=$NODE_NAME"
                echo "AdvertiseURL=http://$host:$FLEET_PORT"
                echo "Etcd=$etcd"
                [ -z "$FLEET_ETCD_PREFIX" ] || echo "EtcdPrefix=$FLEET_ETCD_PREFIX"
                [ -z "$FLEET_LEASE_TTL" ] || echo "LeaseTTLSec=$FLEET_LEASE_TTL"
                [ -z "$FLEET_ETCD_CA_FILE" ] || echo "EtcdCAFile=$FLEET_ETCD_CA_FILE"
                [ -z "$FLEET_ETCD_CERT_FILE" ] || echo "EtcdCertFile=$FLEET_ETCD_CERT_FILE"
                [ -z "$FLEET_ETCD_KEY_FILE" ] || echo "EtcdKeyFile=$FLEET_ETCD_KEY_FILE"
        }

        # The unit's property $1 (LoadState, ActiveState) on stdout; busctl prints 's "active"'.
        property() {
                out=$("$BUSCTL" get-property org.freedesktop.systemd1 "$UNIT_PATH" org.freedesktop.systemd1.Unit "$1") ||
                        return 1
                echo "$out" | sed -n 's/^s "\(.*\)"$/\1/p'
        }

        manager() {
                "$BUSCTL" call org.freedesktop.systemd1 /org/freedesktop/systemd1 \
                        org.freedesktop.systemd1.Manager "$1" ss "$UNIT" replace >/dev/null
        }

        ready() {
                [ -z "$AGENT_READY_FILE" ] && return 0
                if [ "$1" = yes ]; then : >"$AGENT_READY_FILE"; else rm -f "$AGENT_READY_FILE"; fi
        }

        failed_passes=0
        pass() {
                file=$DROPIN_DIR/50-fleet.conf
                changed=no
                new=$(render)
                old=$(cat "$file" 2>/dev/null)
                if [ "$new" != "$old" ]; then
                        tmp=$DROPIN_DIR/.50-fleet.conf.agent
                        if ! { echo "$new" >"$tmp" && chmod 0644 "$tmp" && mv -f "$tmp" "$file"; }; then
                                rm -f "$tmp"
                                log "cannot write $file"
                                ready no
                                return 1
                        fi
                        changed=yes
                        log "wrote $file"
                fi
                load=$(property LoadState) || { log "cannot ask systemd over D-Bus for $UNIT"; ready no; return 1; }
                if [ "$load" != loaded ]; then
                        log "$UNIT is $load on this node: install the sandbox-runner package"
                        ready no
                        return 1
                fi
                state=$(property ActiveState) || { log "cannot ask systemd over D-Bus for $UNIT"; ready no; return 1; }
                case $state in
                active | reloading)
                        failed_passes=0
                        if [ $changed = yes ]; then
                                log "$UNIT is $state: reloading it (it finishes its runs, then starts with the new drop-in)"
                                manager ReloadUnit || { log "ReloadUnit $UNIT failed"; ready no; return 1; }
                                ready no
                                return 0
                        fi
                        ready yes
                        return 0
                        ;;
                inactive)
                        log "$UNIT is inactive: starting it"
                        manager StartUnit || { log "StartUnit $UNIT failed"; ready no; return 1; }
                        ;;
                failed)
                        # A bad configuration (exit status 78) fails again at once: try again when the
                        # drop-in changed, else every sixth pass, not on each.
                        failed_passes=$((failed_passes + 1))
                        if [ $changed = yes ] || [ $((failed_passes % 6)) = 1 ]; then
                                log "$UNIT failed (journalctl -u $UNIT says why): starting it again"
                                manager StartUnit || log "StartUnit $UNIT failed"
                        fi
                        ready no
                        return 1
                        ;;
                *)
                        log "$UNIT is $state: waiting"
                        ;;
                esac
                ready no
                return 0
        }

        trap 'exit 0' TERM INT
        while :; do
                pass
                rc=$?
                [ "$AGENT_ONCE" = 1 ] && exit $rc
                sleep "$AGENT_INTERVAL" &
                wait $!
        done
        EOT
      }

      # It sleeps between passes of a few busctl calls.
      resources {
        cpu    = 20
        memory = 32
      }

      kill_timeout = "5s"
    }
  }
}
