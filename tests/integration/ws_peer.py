#!/usr/bin/python3
"""WebSocket peers for sluice's integration tests, on Debian's python3-websockets.

  ws_peer.py server [--tls CERT KEY]
      An echo server on 127.0.0.1, port picked by the kernel; prints "listening on
      127.0.0.1:PORT". Every message comes back as it came (text or binary). A request for
      /deny is answered 403 with the body "denied\\n" instead of switching. With --tls, it
      speaks TLS (wss) with that certificate and key, and prefers h2 when ALPN offers it.

  ws_peer.py client URL [--idle SECONDS] [--hold SECONDS]
      Connects (waits --idle seconds first once connected), sends a text message and a
      100 KiB binary one and checks each echo, keeps the connection --hold seconds, then
      closes with code 1000. Prints a line per step: "status N" when the handshake was
      answered N instead of 101, "text ok", "binary ok", "closed 1000", or "dropped" when the
      connection ended under it. Exits 0 when every step it reached went as it should.
"""
import asyncio
import http
import os
import ssl
import sys

import websockets


async def echo(ws, path=None):
    try:
        async for message in ws:
            await ws.send(message)
    except websockets.exceptions.ConnectionClosed:
        pass  # the tests cut tunnels off on purpose


async def deny(path, headers):
    if path == "/deny":
        return (http.HTTPStatus.FORBIDDEN,
                websockets.datastructures.Headers([("Content-Type", "text/plain")]), b"denied\n")
    return None


async def server(tls):
    context = None
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls[0], tls[1])
        # As many servers do, it would rather speak h2: a client must not offer it for this.
        context.set_alpn_protocols(["h2", "http/1.1"])
    async with websockets.serve(echo, "127.0.0.1", 0, process_request=deny, max_size=None,
                                ssl=context) as s:
        port = s.sockets[0].getsockname()[1]
        print(f"listening on 127.0.0.1:{port}", flush=True)
        await asyncio.Future()


async def client(url, idle, hold):
    try:
        async with websockets.connect(url, max_size=None, open_timeout=5,
                                      close_timeout=3) as ws:
            if idle:
                await asyncio.sleep(idle)
            await ws.send("hello, tunnel")
            if await asyncio.wait_for(ws.recv(), 5) != "hello, tunnel":
                print("text wrong", flush=True)
                return 1
            print("text ok", flush=True)
            data = os.urandom(100 * 1024)
            await ws.send(data)
            if await asyncio.wait_for(ws.recv(), 5) != data:
                print("binary wrong", flush=True)
                return 1
            print("binary ok", flush=True)
            if hold:
                print("holding", flush=True)
                try:  # a connection ended under it is told at once
                    await asyncio.wait_for(ws.wait_closed(), hold)
                    print("dropped", flush=True)
                    return 0
                except asyncio.TimeoutError:
                    pass
                await ws.ping()
            await ws.close(1000)
            print(f"closed {ws.close_code}", flush=True)
            return 0
    except websockets.exceptions.InvalidStatusCode as e:
        print(f"status {e.status_code}", flush=True)
        return 0
    except (websockets.exceptions.ConnectionClosed, websockets.exceptions.InvalidHandshake,
            ConnectionError, asyncio.TimeoutError, OSError):
        print("dropped", flush=True)
        return 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "server":
        asyncio.run(server(sys.argv[3:5] if sys.argv[2:3] == ["--tls"] else None))
        return 0
    if len(sys.argv) >= 3 and sys.argv[1] == "client":
        options = dict(zip(sys.argv[3::2], sys.argv[4::2]))
        return asyncio.run(client(sys.argv[2], float(options.get("--idle", 0)),
                                  float(options.get("--hold", 0))))
    print(__doc__, file=sys.stderr)
    return 2


sys.exit(main())
