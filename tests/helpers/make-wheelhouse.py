#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The test wheelhouse of the environment tests: tiny pure-Python wheels built with zipfile only
(no pip, no setuptools, no network), valid enough for pip 23 to install them (WHEEL, METADATA,
RECORD with sha256 hashes), byte for byte the same on every run (fixed zip timestamps and
modes, stored, files in a fixed order).

    /usr/bin/python3 tests/helpers/make-wheelhouse.py OUTDIR

writes
    OUTDIR/wheelhouse/srtest_alpha-1.0-py3-none-any.whl   VERSION = "1.0"
    OUTDIR/wheelhouse/srtest_alpha-2.0-py3-none-any.whl   VERSION = "2.0", Requires-Dist:
                                                          srtest_beta>=1.0, beta_version()
    OUTDIR/wheelhouse/srtest_beta-1.0-py3-none-any.whl    VERSION = "1.0"
    OUTDIR/client/srtest_gamma-0.1-py3-none-any.whl       VERSION = "0.1" (a client's wheel,
                                                          outside the wheelhouse)
and prints each path.  Python 3 standard library only."""

import base64
import hashlib
import os
import sys
import zipfile

DATE_TIME = (2020, 1, 1, 0, 0, 0)

ALPHA_2_INIT = '''"""srtest_alpha 2.0: needs srtest_beta."""
import srtest_beta

VERSION = "2.0"


def beta_version():
    return srtest_beta.VERSION
'''

WHEELS = [
    # (subdirectory, distribution, version, Requires-Dist lines, __init__.py)
    ("wheelhouse", "srtest_alpha", "1.0", [], '"""srtest_alpha 1.0."""\nVERSION = "1.0"\n'),
    ("wheelhouse", "srtest_alpha", "2.0", ["srtest_beta>=1.0"], ALPHA_2_INIT),
    ("wheelhouse", "srtest_beta", "1.0", [], '"""srtest_beta 1.0."""\nVERSION = "1.0"\n'),
    ("client", "srtest_gamma", "0.1", [], '"""srtest_gamma 0.1."""\nVERSION = "0.1"\n'),
]


def record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def wheel_bytes_files(name, version, requires, init):
    """The files of one wheel, in archive order: [(path, bytes)], RECORD last."""
    info = "%s-%s.dist-info" % (name, version)
    metadata = ["Metadata-Version: 2.1", "Name: " + name, "Version: " + version,
                "Summary: sandbox-runner test distribution " + name,
                "License: LGPL-2.1-or-later"]
    metadata += ["Requires-Dist: " + r for r in requires]
    files = [
        ("%s/__init__.py" % name, init.encode()),
        ("%s/METADATA" % info, ("\n".join(metadata) + "\n\n").encode()),
        ("%s/WHEEL" % info, b"Wheel-Version: 1.0\nGenerator: sandbox-runner make-wheelhouse\n"
                            b"Root-Is-Purelib: true\nTag: py3-none-any\n\n"),
        ("%s/top_level.txt" % info, (name + "\n").encode()),
    ]
    record = "".join("%s,%s,%d\n" % (p, record_hash(d), len(d)) for p, d in files)
    record += "%s/RECORD,,\n" % info
    files.append(("%s/RECORD" % info, record.encode()))
    return files


def write_wheel(path, files):
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
        for p, data in files:
            zi = zipfile.ZipInfo(p, date_time=DATE_TIME)
            zi.compress_type = zipfile.ZIP_STORED
            zi.create_system = 3                    # unix, so external_attr holds the mode
            zi.external_attr = (0o100644 << 16)
            zf.writestr(zi, data)
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        sys.stderr.write("usage: make-wheelhouse.py OUTDIR\n")
        return 2
    out = argv[1]
    for sub, name, version, requires, init in WHEELS:
        d = os.path.join(out, sub)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "%s-%s-py3-none-any.whl" % (name, version))
        write_wheel(path, wheel_bytes_files(name, version, requires, init))
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
