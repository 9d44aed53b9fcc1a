#!/usr/bin/env python3
"""Make the kubelet's .proto files readable by Debian's protoc-c (protobuf-c 1.4.1).

    proto_for_c.py IN.proto OUT.proto

protoc-c 1.4.1 refuses proto3 `optional` fields (presence tracking), which
k8s.io/kubelet's podresources/v1/api.proto has one of (ClaimResource.share_id).
Dropping the keyword changes no byte on the wire (the same field number and
type, encoded the same way); troupe-node never reads that field. Any other
`optional` than a field's is an error, so a future upstream change is seen.

The `service` blocks are dropped too: troupe-node calls and serves the
methods by their paths over gRPC's C core, not through protobuf-c's service
stubs, and protoc-c 1.4.1 names a stub's member after its method, so the
device plugin API's Registration.Register becomes a member called
`register`, a C keyword that does not compile. The messages are untouched.
"""
import re
import sys


def main(src, dst):
    with open(src, encoding="utf-8") as f:
        text = f.read()
    out, n = re.subn(r"(?m)^(\s*)optional\s+(?=\w+\s+\w+\s*=\s*\d+\s*;)", r"\1", text)
    if re.search(r"(?m)^\s*optional\b", out):
        sys.exit(f"proto_for_c: {src}: an `optional` that is not a field's")
    # A service block holds only rpc lines (with {} or empty option blocks),
    # comments and blank lines: no nested braces beyond one level.
    out, services = re.subn(r"(?ms)^service\s+\w+\s*\{(?:[^{}]|\{[^{}]*\})*\}\s*\n", "", out)
    with open(dst, "w", encoding="utf-8") as f:
        f.write(f"// Generated from {src.rsplit('/', 1)[-1]} by proto_for_c.py: "
                f"{n} proto3 `optional` and {services} service blocks dropped for "
                f"protoc-c.\n" + out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
