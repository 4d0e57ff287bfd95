#!/usr/bin/env python3
"""Silent or stalled HTTP(S) connections against `neupims serve` (issue 18; docs/reliability.md).

Opens N connections to the HTTP API's port that stop before their first request, times
`GET /health` on a new connection, then has each stopped connection go on and send
`GET /health`, and counts the 200 answers. With --linger S it instead leaves them stopped for
S seconds and counts those the server closed.

Where they stop (--stage): `connect` sends nothing (plain HTTP, or HTTPS before the
ClientHello); `request` sends the first part of its request (the request line and a header, not
the head's end: a slowloris client), plain or over TLS; with --tls also `hello` (the first 20
bytes of the ClientHello) and `handshake` (the whole handshake, then no request). The server's
certificate is not checked.

Usage: bench/silent_connections.py PORT N [--linger SECONDS] [--tls] [--stage STAGE]
  e.g. neupims serve --pacing fast --http-threads 4 --port 0 --metrics-port -1 --http-port 18123 &
       bench/silent_connections.py 18123 200
"""
import argparse
import socket
import ssl
import time

REQUEST = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
HELLO_PART = 20  # bytes of the ClientHello a `hello` connection sends before it stops
REQUEST_PART = len(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # what a `request` one sends


def tls_context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class Stopped:
    """One connection that stops at `stage`, then goes on (ask) or is left (closed_by_server)."""

    def __init__(self, port, tls, stage):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.tls = None
        self.hello_rest = b""
        self.sent = REQUEST_PART if stage == "request" else 0  # bytes of REQUEST sent
        if not tls:
            self.sock.sendall(REQUEST[:self.sent])
            return
        # TLS over memory buffers: the bytes on the wire are sent by hand, so the ClientHello
        # can stop partway.
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = tls_context().wrap_bio(self.incoming, self.outgoing)
        if stage == "hello":
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                pass
            hello = self.outgoing.read()
            self.sock.sendall(hello[:HELLO_PART])
            self.hello_rest = hello[HELLO_PART:]
        elif stage in ("handshake", "request"):
            self.handshake()
            if self.sent:
                self.pump(lambda: self.tls.write(REQUEST[:self.sent]))

    def pump(self, call):
        """Runs an SSLObject call, moving bytes between it and the socket until it returns."""
        while True:
            try:
                result = call()
                self.sock.sendall(self.outgoing.read())
                return result
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("closed by the server")
                self.incoming.write(data)

    def handshake(self):
        if self.hello_rest:
            self.sock.sendall(self.hello_rest)
            self.hello_rest = b""
        self.pump(self.tls.do_handshake)

    def ask(self):
        """Goes on from where it stopped, sends the request; the answer's first bytes."""
        self.sock.settimeout(10)
        if self.tls is None:
            self.sock.sendall(REQUEST[self.sent:])
            return self.sock.recv(64)
        if self.tls.version() is None:
            self.handshake()
        self.pump(lambda: self.tls.write(REQUEST[self.sent:]))
        return self.pump(lambda: self.tls.read(64))

    def closed_by_server(self):
        """Whether the server closed the connection, and the answer's status line before it
        (plain HTTP; over TLS the records are not decrypted: None)."""
        self.sock.settimeout(1)
        answer = b""
        try:
            while data := self.sock.recv(4096):  # a TLS server may send records first
                answer += data
        except OSError:
            return False, None
        return True, None if self.tls else answer.split(b"\r\n")[0].decode(errors="replace")


def timed_health(port, tls):
    start = time.monotonic()
    client = socket.create_connection(("127.0.0.1", port))
    client.settimeout(30)
    answer = b""
    try:
        if tls:
            client = tls_context().wrap_socket(client)
        client.sendall(REQUEST)
        while chunk := client.recv(4096):
            answer += chunk
        status = answer.split(b"\r\n")[0].decode()
    except (TimeoutError, ssl.SSLError):
        status = "no answer within 30 s"
    return status, (time.monotonic() - start) * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("port", type=int)
    ap.add_argument("n", type=int, help="stopped connections")
    ap.add_argument("--linger", type=float, help="leave them stopped this long, count the closed")
    ap.add_argument("--tls", action="store_true", help="the server's HTTP API is HTTPS")
    ap.add_argument("--stage", choices=["connect", "request", "hello", "handshake"],
                    default="connect",
                    help="where each connection stops (hello and handshake need --tls)")
    args = ap.parse_args()
    if args.stage in ("hello", "handshake") and not args.tls:
        ap.error(f"--stage {args.stage} needs --tls")
    opening = time.monotonic()
    stopped = [Stopped(args.port, args.tls, args.stage) for _ in range(args.n)]
    opened_s = time.monotonic() - opening
    time.sleep(0.3)  # the server's threads take the first ones
    status, ms = timed_health(args.port, args.tls)
    print(f"{args.n} connections stopped at '{args.stage}' (opened in {opened_s:.2f} s): "
          f"GET /health: {status} after {ms:.1f} ms")
    if args.linger is not None:
        time.sleep(args.linger)
        ends = [s.closed_by_server() for s in stopped]
        closed = sum(c for c, _ in ends)
        statuses = {}
        for c, line in ends:
            if c and line is not None:
                statuses[line or "(nothing)"] = statuses.get(line or "(nothing)", 0) + 1
        told = "; ".join(f"{n} {line!r}" for line, n in sorted(statuses.items()))
        print(f"after {args.linger:g} s: {closed} of {args.n} closed by the server"
              + (f" ({told})" if told else ""))
        return
    start = time.monotonic()
    answered = 0
    for s in stopped:
        try:
            answered += s.ask().startswith(b"HTTP/1.1 200")
        except (OSError, ssl.SSLError, ConnectionError):
            pass
    print(f"then {answered} of {args.n} answered 200 on their own connection "
          f"({time.monotonic() - start:.2f} s)")


if __name__ == "__main__":
    main()
