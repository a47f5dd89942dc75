#!/usr/bin/env python3
"""Holds N idle keep-alive HTTP/1.1 connections open against 127.0.0.1:PORT.

    tests/bench/idle.py PORT N [PATH] [MAX_SECONDS]        (defaults /x 120)

Each connection sends one GET PATH, reads the whole answer (Content-Length) and then stays
open, sending nothing more: a keep-alive connection between requests, as browsers and
connection pools leave them. PATH "-" sends nothing at all: the connection is idle from its
accept on. At most 256 connections are being opened at once, so the
listen backlog does not overflow. When every connection has been tried (or after 60 s),
one line goes to stdout:

    opened OK FAILED codes=200:N,... errors=KIND:N,...

Then it waits, watching for connections the server closes, until SIGTERM or SIGINT or
MAX_SECONDS, and prints before exiting:

    held M closed_by_server K

Only 127.0.0.1 is ever contacted.
"""
import errno
import resource
import selectors
import signal
import socket
import sys
import time

port = int(sys.argv[1])
total = int(sys.argv[2])
path = sys.argv[3] if len(sys.argv) > 3 else "/x"
max_seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 120.0
PARALLEL = 256
OPEN_LIMIT = 60.0

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if hard == resource.RLIM_INFINITY or hard > soft:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

request = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: sluice-idle\r\n"
           "Accept: */*\r\n\r\n" % (path, port)).encode()
sel = selectors.DefaultSelector()
stop = False


def on_signal(_signum, _frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)

codes, errors = {}, {}
opened = failed = started = in_flight = 0
idle = set()          # sockets done with their request, now held open
closed_by_server = 0


def fail(sock, kind):
    global failed, in_flight
    errors[kind] = errors.get(kind, 0) + 1
    failed += 1
    in_flight -= 1
    try:
        sel.unregister(sock)
    except (KeyError, ValueError):
        pass
    sock.close()


def start_one():
    global started, in_flight, failed
    started += 1
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    except OSError as e:  # out of descriptors
        kind = errno.errorcode.get(e.errno, str(e.errno))
        errors[kind] = errors.get(kind, 0) + 1
        failed += 1
        return
    s.setblocking(False)
    in_flight += 1
    state = {"phase": "connect", "buf": b""}
    sel.register(s, selectors.EVENT_WRITE, state)
    err = s.connect_ex(("127.0.0.1", port))
    if err not in (0, errno.EINPROGRESS):
        fail(s, errno.errorcode.get(err, str(err)))


def answer_done(buf):
    """(code, complete) for a response in buf."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None, False
    head = buf[:end].split(b"\r\n")
    code = head[0].split()[1].decode() if len(head[0].split()) > 1 else "?"
    length = 0
    for line in head[1:]:
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return code, len(buf) >= end + 4 + length


def step(sock, state, mask):
    global opened, in_flight, closed_by_server
    if state["phase"] == "connect":
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            return fail(sock, errno.errorcode.get(err, str(err)))
        if path == "-":
            codes["none"] = codes.get("none", 0) + 1
            state["phase"] = "idle"
            opened += 1
            in_flight -= 1
            idle.add(sock)
            sel.modify(sock, selectors.EVENT_READ, state)
            return
        try:
            sock.send(request)
        except OSError as e:
            return fail(sock, errno.errorcode.get(e.errno, "send"))
        state["phase"] = "answer"
        sel.modify(sock, selectors.EVENT_READ, state)
        return
    try:
        data = sock.recv(65536)
    except OSError as e:
        data = None
        kind = errno.errorcode.get(e.errno, "recv")
    if state["phase"] == "answer":
        if not data:
            return fail(sock, "closed" if data == b"" else kind)
        state["buf"] += data
        code, complete = answer_done(state["buf"])
        if complete:
            codes[code] = codes.get(code, 0) + 1
            state["phase"] = "idle"
            state["buf"] = b""
            opened += 1
            in_flight -= 1
            idle.add(sock)
        return
    # idle: anything readable is the server closing (or misbehaving)
    if not data:
        closed_by_server += 1
        idle.discard(sock)
        sel.unregister(sock)
        sock.close()


t0 = time.monotonic()
while (started < total or in_flight > 0) and time.monotonic() - t0 < OPEN_LIMIT and not stop:
    while started < total and in_flight < PARALLEL:
        start_one()
    for key, mask in sel.select(timeout=0.5):
        step(key.fileobj, key.data, mask)
# connections still opening at the limit count as failed
for key in list(sel.get_map().values()):
    if key.data["phase"] != "idle":
        fail(key.fileobj, "timeout")
fmt = lambda d: ",".join("%s:%d" % kv for kv in sorted(d.items())) or "-"
print("opened %d %d codes=%s errors=%s" % (opened, failed, fmt(codes), fmt(errors)), flush=True)

while not stop and time.monotonic() - t0 < max_seconds:
    for key, mask in sel.select(timeout=0.5):
        step(key.fileobj, key.data, mask)
print("held %d closed_by_server %d" % (len(idle), closed_by_server), flush=True)
