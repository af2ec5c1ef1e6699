#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real etcd cluster on loopback for the length of one command.

    etcd-cluster.py [--members N] [--tls] [--etcd /usr/bin/etcd] [--timeout S] -- COMMAND [ARGS...]

Starts N members of Debian's etcd (etcd-server, 3.4) on 127.0.0.1, client and peer ports chosen
free at run time, each with its own data directory under one temporary directory; waits until
each answers GET /health with {"health":"true"}; runs COMMAND with ETCD_ENDPOINTS set to the
members' client URLs (comma-separated, member 0 first) and exits with its status. The members are
stopped on the way out, whatever happens (SIGTERM, then SIGKILL after 2 s), by the pids this
script started and nothing else; so is COMMAND on SIGTERM/SIGINT. Its own lines on stdout are TAP
comments ("# ..."); when etcd is missing or the cluster does not come up it prints "Bail out!" and
exits 1 (never a skip: the CI installs etcd-server).

--tls: the client URLs are https:// with certificates made by openssl for this run (a CA, the
members' certificate for IP 127.0.0.1, a client certificate), and the members require a client
certificate signed by that CA; COMMAND gets ETCD_CA_FILE, ETCD_CERT_FILE and ETCD_KEY_FILE too.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request


class Stop(Exception):
    pass


def on_signal(signum, frame):
    raise Stop(f"signal {signum}")


def note(msg):
    print(f"# etcd-cluster: {msg}", flush=True)


def free_ports(n):
    """n distinct loopback ports that were free a moment ago (all held while choosing)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def healthy(url, tls):
    context = None
    if tls:
        context = ssl.create_default_context(cafile=tls["ca"])
        context.load_cert_chain(tls["cert"], tls["key"])
    try:
        with urllib.request.urlopen(url + "/health", timeout=1, context=context) as r:
            return json.load(r).get("health") == "true"
    except (OSError, ValueError):
        return False


def make_certificates(d):
    """A CA, the members' certificate (IP 127.0.0.1) and a client's, all EC P-256, for one day."""
    os.makedirs(d)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]

    def openssl(*argv):
        subprocess.run(["openssl", *argv], cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=sr-test-etcd-ca", "-days", "1")
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth"),
                      ("client", "extendedKeyUsage=clientAuth")):
        with open(os.path.join(d, name + ".ext"), "w") as fh:
            fh.write(ext + "\n")
        openssl("req", *ec, "-keyout", name + ".key", "-out", name + ".csr", "-subj", f"/CN=sr-test-{name}")
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", name + ".crt", "-days", "1", "-extfile", name + ".ext")
    return {"ca": os.path.join(d, "ca.crt"), "cert": os.path.join(d, "client.crt"),
            "key": os.path.join(d, "client.key"), "server_cert": os.path.join(d, "server.crt"),
            "server_key": os.path.join(d, "server.key")}


class Cluster:
    def __init__(self, etcd, members, top, tls):
        self.etcd, self.n, self.top, self.tls = etcd, members, top, tls
        self.procs = []                 # (name, Popen, log path)
        self.clients = []

    def start(self):
        ports = free_ports(2 * self.n)
        names = [f"m{i}" for i in range(self.n)]
        scheme = "https" if self.tls else "http"
        self.clients = [f"{scheme}://127.0.0.1:{ports[2 * i]}" for i in range(self.n)]
        peers = [f"http://127.0.0.1:{ports[2 * i + 1]}" for i in range(self.n)]
        initial = ",".join(f"{names[i]}={peers[i]}" for i in range(self.n))
        token = f"sr-test-{os.getpid()}-{time.monotonic_ns()}"
        for i, name in enumerate(names):
            data = os.path.join(self.top, name)
            log = os.path.join(self.top, name + ".log")
            argv = [self.etcd, "--name", name, "--data-dir", data,
                    "--listen-client-urls", self.clients[i], "--advertise-client-urls", self.clients[i],
                    "--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
                    "--initial-cluster", initial, "--initial-cluster-state", "new",
                    "--initial-cluster-token", token, "--logger", "zap", "--log-outputs", "stderr",
                    "--log-level", "warn"]
            if self.tls:
                argv += ["--cert-file", self.tls["server_cert"], "--key-file", self.tls["server_key"],
                         "--trusted-ca-file", self.tls["ca"], "--client-cert-auth"]
            with open(log, "wb") as fh:
                p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                     cwd=self.top)
            self.procs.append((name, p, log))

    def wait_healthy(self, timeout):
        deadline = time.monotonic() + timeout
        pending = list(range(self.n))
        while pending:
            for name, p, _ in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"etcd member {name} (pid {p.pid}) exited with {p.returncode}")
            pending = [i for i in pending if not healthy(self.clients[i], self.tls)]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd members {pending} not healthy after {timeout} s")
            time.sleep(0.1)

    def stop(self):
        for _, p, _ in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        # a leader stopped with its followers tries to hand over its leadership for a while: its
        # data directory goes anyway, so it gets 2 s and then SIGKILL
        deadline = time.monotonic() + 2
        for name, p, _ in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []

    def dump_logs(self):
        for name, _, log in self.procs:
            try:
                with open(log, errors="replace") as fh:
                    lines = fh.read().splitlines()[-15:]
            except OSError:
                continue
            for line in lines:
                note(f"{name}: {line}")


def run(args):
    if not (os.path.isfile(args.etcd) and os.access(args.etcd, os.X_OK)):
        print(f"Bail out! {args.etcd} not found: install Debian's etcd-server (tests/setup.sh does)", flush=True)
        return 1

    top = tempfile.mkdtemp(prefix="sr-etcd-")
    cluster = None
    child = None
    try:
        tls = None
        if args.tls:
            try:
                tls = make_certificates(os.path.join(top, "tls"))
            except (OSError, subprocess.CalledProcessError) as e:
                print(f"Bail out! making the test certificates with openssl: {e}", flush=True)
                return 1
        # a port taken between choosing and binding: try again with others
        for attempt in range(3):
            cluster = Cluster(args.etcd, args.members, os.path.join(top, f"try{attempt}"), tls)
            os.makedirs(cluster.top)
            cluster.start()
            try:
                cluster.wait_healthy(args.timeout)
                break
            except RuntimeError as e:
                note(f"attempt {attempt + 1}: {e}")
                cluster.dump_logs()
                cluster.stop()
                cluster = None
        if cluster is None:
            print(f"Bail out! no healthy {args.members}-member etcd cluster on loopback", flush=True)
            return 1

        started = time.monotonic()
        note(f"{args.members} member(s) healthy: {','.join(cluster.clients)}")
        env = dict(os.environ, ETCD_ENDPOINTS=",".join(cluster.clients))
        if tls:
            env.update(ETCD_CA_FILE=tls["ca"], ETCD_CERT_FILE=tls["cert"], ETCD_KEY_FILE=tls["key"])
        child = subprocess.Popen(args.command, env=env)
        rc = child.wait()
        child = None
        note(f"command exited with {rc} after {time.monotonic() - started:.1f} s")
        if rc != 0 and cluster:
            cluster.dump_logs()
        return rc
    except Stop as e:
        note(f"stopping: {e}")
        return 1
    finally:
        if child and child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if cluster:
            cluster.stop()
        shutil.rmtree(top, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=3)
    ap.add_argument("--tls", action="store_true", help="https with client certificates")
    ap.add_argument("--etcd", default="/usr/bin/etcd")
    ap.add_argument("--timeout", type=float, default=30, help="seconds for the cluster to become healthy")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command or args.members < 1:
        ap.error("a command to run after --, and at least one member")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
