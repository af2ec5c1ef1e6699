#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Reads the function entries trace-hook.c wrote for one execution (trace-execution.sh).

    trace-report.py DAEMON SRCDIR TRACE

Each entry is "callee call-site", offsets in DAEMON; addr2line turns them into source files. A
"stop" is a call from a function of one file of src/ into a function of another; it goes "back up
a layer" when the callee's module is higher in the layering of docs/architecture.md than the
caller's (a callback, or a lower module reaching into a higher one). Calls through libraries
(sd-event, libmicrohttpd) have a call site outside src/ and are counted as entries only.
"""

import collections
import os
import subprocess
import sys

# docs/architecture.md, "Module map": bottom to top; modules on one line are one layer.
LAYERS = [["util"], ["config"], ["http", "sandbox", "workspace", "workspace/cas", "egress"], ["environment"], ["execution"],
          ["core"], ["api"], ["daemon"]]
RANK = {m: i for i, layer in enumerate(LAYERS) for m in layer}


def main():
    daemon, src, trace = sys.argv[1:4]
    src = os.path.realpath(src)
    entries = []
    with open(trace) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) == 2:
                entries.append((int(parts[0], 16), int(parts[1], 16)))
    addrs = sorted({a for e in entries for a in e})
    out = subprocess.run(["addr2line", "-f", "-e", daemon] + [hex(a) for a in addrs],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    name = {a: out[2 * i] for i, a in enumerate(addrs)}
    out = out[1::2]
    where = {}
    for a, loc in zip(addrs, out):
        path = loc.rsplit(":", 1)[0]
        path = os.path.realpath(path) if path.startswith("/") else path
        where[a] = os.path.relpath(path, src) if path.startswith(src + os.sep) else None

    def module(f):
        # before src/api/ existed the handlers were http/http-api.c and http/http-files.c: rank them
        # as what they are, so that a trace of an older tree compares with a newer one
        if f in ("http/http-api.c", "http/http-files.c"):
            return "api"
        d = os.path.dirname(f)
        return d or "(top)"

    def leaf(f):
        # util/ and the inline helpers of headers are leaves: counted, but not as stops
        return f.startswith("util/") or f.endswith(".h")

    mstops = mup = 0
    up_pairs = collections.Counter()
    mods = set()
    mod_into = collections.Counter()
    files = collections.Counter()
    stops = up = callbacks = 0
    into = collections.Counter()
    for fn, site in entries:
        callee, caller = where.get(fn), where.get(site)
        if callee is None:
            continue
        files[callee] += 1
        if not leaf(callee):
            mods.add(module(callee))
            if caller is None or (not leaf(caller) and module(caller) != module(callee)):
                mod_into[module(callee)] += 1
                if caller is not None:
                    mstops += 1
                    if RANK.get(module(callee), -1) > RANK.get(module(caller), -1):
                        mup += 1
                        up_pairs[(caller, callee, name.get(fn, "?"))] += 1
        if leaf(callee) or caller == callee:
            continue
        if caller is None:
            # entered from a library: an sd-event or libmicrohttpd callback
            callbacks += 1
            into[callee] += 1
            continue
        if leaf(caller):
            continue
        stops += 1
        into[callee] += 1
        if RANK.get(module(callee), -1) > RANK.get(module(caller), -1):
            up += 1
    print(f"function entries in src/: {sum(files.values())}")
    print(f"files passed through: {len(files)} ({sum(1 for f in files if not leaf(f))} outside util/ and headers)")
    print(f"stops (calls from one file into another, util/ and header inlines left out): {stops}")
    print(f"  of which back up a layer: {up}")
    print(f"callbacks (entries from sd-event or libmicrohttpd): {callbacks}")
    if into:
        hub, n = into.most_common(1)[0]
        print(f"file most entered from outside itself: {hub} ({n} times: other files and callbacks)")
    print(f"modules passed through: {len(mods)} ({', '.join(sorted(mods))})")
    print(f"calls from one module into another: {mstops}, of which back up a layer: {mup}")
    print("entries into each module from outside it (other modules and callbacks): "
          + ", ".join(f"{m} {n}" for m, n in mod_into.most_common()))
    for (caller, callee, fname), n in sorted(up_pairs.items()):
        print(f"  up: {caller} -> {callee} {fname}() x{n}")
    print("files:")
    for f, n in sorted(files.items()):
        print(f"  {n:6d}  {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
