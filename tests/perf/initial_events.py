#!/usr/bin/env python3
"""How long fitledger-sim takes to stream a WatchList's initial state to a reader that does nothing
with it: the floor under fitledger-server's initial sync, which asks the same (tests/perf/run.sh).

  initial_events.py PORT PATH [--timeout S] [--accept MEDIA]
      prints {"ms": ..., "bytes": ...} once the initial-events-end bookmark has arrived (ms from
      the request's first byte sent); exits 1 with a message if the reply is not a 200, the
      stream ends before the bookmark, or nothing arrives for S seconds (default 300)

PATH is the watch with sendInitialEvents=true and allowWatchBookmarks=true. --accept is the Accept
header (default: what fitledger-server sends, protobuf then JSON); the bookmark's annotation is
looked for as JSON text or, in a protobuf stream, as the annotation map entry's bytes (key, then
field 2, length 4, "true"). Reads the raw socket
in 4 MiB pieces and only looks for the bookmark's annotation, with the chunked framing left as it
is (the sim writes the bookmark in one piece, one chunk, so no chunk header splits the annotation).
"""
import argparse
import json
import socket
import sys
import time

MARKER = b'"k8s.io/initial-events-end":"true"'
PROTOBUF_MARKER = b'k8s.io/initial-events-end\x12\x04true'


def fail(message):
    print(f"initial_events.py: {message}", file=sys.stderr)
    return 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("port", type=int)
    parser.add_argument("path")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--accept", default="application/vnd.kubernetes.protobuf, application/json")
    args = parser.parse_args()
    marker = MARKER
    sock = socket.create_connection(("127.0.0.1", args.port), timeout=args.timeout)
    start = time.monotonic()
    sock.sendall(f"GET {args.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {args.accept}\r\n"
                 f"Connection: close\r\n\r\n".encode())
    buf = bytearray(4 << 20)
    view = memoryview(buf)
    total = 0
    head = b""
    tail = b""
    while True:
        try:
            n = sock.recv_into(view)
        except socket.timeout:
            return fail(f"nothing for {args.timeout:g} s after {total} bytes")
        if n == 0:
            return fail(f"the stream ended after {total} bytes, before the initial-events-end "
                        f"bookmark: {bytes(head[:200])!r}")
        if len(head) < 64:
            head += bytes(view[:min(n, 64)])
            if len(head) >= 12 and not head.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")):
                status = head.split(b"\r\n")[0].decode(errors="replace")
                return fail(f"not a 200: {status}")
        if total == 0:
            headers = bytes(view[:n]).split(b"\r\n\r\n")[0].lower()
            if b"content-type: application/vnd.kubernetes.protobuf" in headers:
                marker = PROTOBUF_MARKER
        total += n
        piece = tail + bytes(view[:n])
        if marker in piece:
            break
        tail = piece[-len(marker):]
    print(json.dumps({"ms": round((time.monotonic() - start) * 1000, 1), "bytes": total,
                      "protobuf": marker == PROTOBUF_MARKER}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
