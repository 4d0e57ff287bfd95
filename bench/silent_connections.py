#!/usr/bin/env python3
"""Silent HTTP connections against `neupims serve` (issue 18; docs/reliability.md).

Opens N TCP connections to the HTTP API's port that send nothing, times `GET /health` on a new
connection, then sends `GET /health` on each silent connection and counts the 200 answers.
With --linger S it instead leaves them silent for S seconds and counts those the server closed.

Usage: bench/silent_connections.py PORT N [--linger SECONDS]
  e.g. neupims serve --pacing fast --http-threads 4 --port 0 --metrics-port -1 --http-port 18123 &
       bench/silent_connections.py 18123 200
"""
import argparse
import socket
import time

REQUEST = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("port", type=int)
    ap.add_argument("n", type=int, help="silent connections")
    ap.add_argument("--linger", type=float, help="leave them silent this long, count the closed")
    args = ap.parse_args()
    silent = [socket.create_connection(("127.0.0.1", args.port)) for _ in range(args.n)]
    time.sleep(0.3)  # the server's threads take the first ones
    start = time.monotonic()
    client = socket.create_connection(("127.0.0.1", args.port))
    client.settimeout(30)
    answer = b""
    try:
        client.sendall(REQUEST)
        while chunk := client.recv(4096):
            answer += chunk
        status = answer.split(b"\r\n")[0].decode()
    except socket.timeout:
        status = "no answer within 30 s"
    print(f"{args.n} silent connections: GET /health: {status} after "
          f"{(time.monotonic() - start) * 1000:.1f} ms")
    if args.linger is not None:
        time.sleep(args.linger)
        closed = 0
        for s in silent:
            s.settimeout(1)
            try:
                closed += s.recv(1) == b""
            except OSError:
                pass
        print(f"after {args.linger:g} s: {closed} of {args.n} closed by the server")
        return
    start = time.monotonic()
    answered = 0
    for s in silent:
        s.settimeout(10)
        try:
            s.sendall(REQUEST)
            answered += s.recv(64).startswith(b"HTTP/1.1 200")
        except OSError:
            pass
    print(f"then {answered} of {args.n} answered 200 on their own socket "
          f"({time.monotonic() - start:.2f} s)")


if __name__ == "__main__":
    main()
