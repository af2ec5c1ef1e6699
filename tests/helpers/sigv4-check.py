#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""An independent check of the SigV4 signatures libcurl makes for src/fleet/s3.c, with botocore.

    sigv4-check.py check --access-key K --secret S --region R FILE...
    sigv4-check.py serve --access-key K --secret S --region R --port-file F

check: each FILE holds the raw bytes of one HTTP/1.1 request as it came over the wire (request
line, headers, body), captured by a loopback server of the test's own. For each, the signature is
recomputed with Debian's python3-botocore (botocore.auth.S3SigV4Auth, the SigV4Auth of S3: the
path is signed as sent, not normalised again) over the same method, path, query, the headers the
Authorization header names in SignedHeaders (their captured values) and the captured X-Amz-Date,
and compared with the captured Signature. Besides, it checks what botocore takes on trust: that
x-amz-content-sha256 is the SHA-256 of the captured body (hashlib), that the credential scope is
<access key>/<X-Amz-Date's day>/<region>/s3/aws4_request, that host, x-amz-date,
x-amz-content-sha256 and every x-amz-* header are signed, that every signed header is in the
request, that botocore would sign the same header list, and that the path is in S3's canonical
percent-encoding. One line per file ("# sigv4-check: FILE: ok ..." or "... MISMATCH: reasons");
exit 0 if every file passes, 1 if one does not, 2 on a usage error or when botocore is missing.

serve: a loopback server on a free port (written to F once it listens) that does the same check
on each request it gets, online, and answers as a strict S3 would about the signature only: 200
(a GET gets "verified\\n", a HEAD a Content-Length and an ETag) when it passes, else 403 with S3's
SignatureDoesNotMatch error document. It stores nothing. Stopped by SIGTERM.
"""

import argparse
import hashlib
import http.server
import os
import re
import signal
import sys
import urllib.parse

try:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError as e:
    print(f"Bail out! sigv4-check.py needs Debian's python3-botocore (apt-get install python3-botocore): {e}",
          flush=True)
    sys.exit(2)

AUTH = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$")
AMZ_DATE = re.compile(r"^\d{8}T\d{6}Z$")
SIGNATURE_MISMATCH = ("The request signature we calculated does not match the signature you provided. "
                      "Check your key and signing method.")


class Request:
    def __init__(self, method, target, headers, body):
        self.method, self.target, self.headers, self.body = method, target, headers, body

    def header(self, name):
        """The values of @name (case-insensitive), in order."""
        return [v for n, v in self.headers if n.lower() == name.lower()]


def parse_raw(raw):
    """A captured request: its bytes as sent. Raises ValueError."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("no end of the headers")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x request line: {lines[0]!r}")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise ValueError(f"not a header line: {line!r}")
        headers.append((name, value.strip(" \t")))
    req = Request(parts[0], parts[1], headers, body)
    length = req.header("Content-Length")
    if length and int(length[0]) != len(body):
        raise ValueError(f"Content-Length {length[0]} but {len(body)} bytes of body captured")
    return req


def verify(req, access_key, secret, region):
    """([reasons why not], what was signed): no reasons when the signature is botocore's."""
    reasons = []
    auth = req.header("Authorization")
    dates = req.header("X-Amz-Date")
    if len(auth) != 1 or not AUTH.match(auth[0]):
        return [f"no single AWS4-HMAC-SHA256 Authorization header: {auth!r}"], ""
    if len(dates) != 1 or not AMZ_DATE.match(dates[0]):
        return [f"no single X-Amz-Date of the form YYYYMMDDTHHMMSSZ: {dates!r}"], ""
    credential, signed, signature = AUTH.match(auth[0]).groups()
    date = dates[0]

    scope = f"{access_key}/{date[:8]}/{region}/s3/aws4_request"
    if credential != scope:
        reasons.append(f"credential scope {credential!r}, expected {scope!r}")
    signed_names = signed.split(";")
    if signed_names != sorted(set(signed_names)):
        reasons.append(f"SignedHeaders not sorted and unique: {signed}")
    for name in ("host", "x-amz-content-sha256", "x-amz-date"):
        if name not in signed_names:
            reasons.append(f"{name} is not signed")
    for name, _ in req.headers:
        if name.lower().startswith("x-amz-") and name.lower() not in signed_names:
            reasons.append(f"{name} is sent but not signed")
    values = {}
    for name in signed_names:
        v = req.header(name)
        if len(v) != 1:
            reasons.append(f"signed header {name!r} appears {len(v)} times in the request")
        else:
            values[name] = v[0]

    content = req.header("x-amz-content-sha256")
    body_hash = hashlib.sha256(req.body).hexdigest()
    if content != [body_hash]:
        reasons.append(f"x-amz-content-sha256 {content!r} is not the body's SHA-256 {body_hash}")

    path, _, query = req.target.partition("?")
    canonical = urllib.parse.quote(urllib.parse.unquote(path, errors="strict"), safe="/~")
    if canonical != path:
        reasons.append(f"path {path!r} is not S3's canonical encoding {canonical!r}")

    host = values.get("host", "")
    aws = AWSRequest(method=req.method, url=f"http://{host}{req.target}", headers=dict(values), data=req.body)
    aws.context["timestamp"] = date
    signer = S3SigV4Auth(Credentials(access_key, secret), "s3", region)
    canonical_request = signer.canonical_request(aws)
    botocore_signed = signer.signed_headers(signer.headers_to_sign(aws))
    if botocore_signed != signed:
        reasons.append(f"libcurl signed {signed}, botocore would sign {botocore_signed}")
    expected = signer.signature(signer.string_to_sign(aws, canonical_request), aws)
    if expected != signature:
        reasons.append(f"signature {signature}, botocore computes {expected}")
    return reasons, f"{req.method} {req.target} Host {host} SignedHeaders={signed}"


def cmd_check(args):
    failed = 0
    for path in args.files:
        try:
            with open(path, "rb") as fh:
                req = parse_raw(fh.read())
            reasons, what = verify(req, args.access_key, args.secret, args.region)
        except (OSError, ValueError, UnicodeError) as e:
            reasons, what = [f"unreadable capture: {e}"], ""
        name = os.path.basename(path)
        if reasons:
            failed += 1
            print(f"# sigv4-check: {name}: MISMATCH: {what}: " + "; ".join(reasons), flush=True)
        else:
            print(f"# sigv4-check: {name}: ok, botocore's signature: {what}", flush=True)
    return 1 if failed else 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        req = Request(self.command, self.path, list(self.headers.items()), body)
        try:
            reasons, what = verify(req, *self.server.credentials)
        except (ValueError, UnicodeError) as e:
            reasons, what = [str(e)], ""
        if reasons:
            print(f"# sigv4-check serve: {what}: MISMATCH: " + "; ".join(reasons), flush=True)
            reply = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch</Code>"
                     f"<Message>{SIGNATURE_MISMATCH}</Message><RequestId>sigv4-check</RequestId></Error>").encode()
            self.send_response(403)
            self.send_header("Content-Type", "application/xml")
        else:
            reply = b"verified\n" if self.command in ("GET", "HEAD") else b""
            self.send_response(204 if self.command == "DELETE" else 200)
            self.send_header("ETag", f"\"{hashlib.md5(body).hexdigest()}\"")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply)

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = answer


def cmd_serve(args):
    # threads: each client keeps its connection open between requests
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.credentials = (args.access_key, args.secret, args.region)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(f"{server.server_address[1]}\n")
    os.rename(tmp, args.port_file)
    server.serve_forever()
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("check", "serve"))
    ap.add_argument("--access-key", required=True)
    ap.add_argument("--secret", required=True)
    ap.add_argument("--region", required=True)
    ap.add_argument("--port-file", help="serve: where the port goes")
    ap.add_argument("files", nargs="*", help="check: the captured requests")
    args = ap.parse_intermixed_args()
    if args.mode == "check" and not args.files:
        ap.error("check needs captured requests")
    if args.mode == "serve" and not args.port_file:
        ap.error("serve needs --port-file")
    return cmd_check(args) if args.mode == "check" else cmd_serve(args)


if __name__ == "__main__":
    sys.exit(main())
