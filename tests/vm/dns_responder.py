#!/usr/bin/env python3
"""A resolver for one test: answers A queries for the names it is given (UDP
and TCP port 53 on one address), NXDOMAIN for any other name, an empty
answer for other types of a known name; every query it saw is appended to a
log file (one line: the name and type).

    dns_responder.py ADDRESS LOG NAME=IPV4...
"""
import socket
import socketserver
import struct
import sys
import threading

address, log = sys.argv[1], sys.argv[2]
names = dict(arg.lower().split("=", 1) for arg in sys.argv[3:])


def answer(query: bytes) -> bytes:
    qid, _flags, qdcount = struct.unpack("!HHH", query[:6])
    pos, labels = 12, []
    while query[pos]:
        labels.append(query[pos + 1:pos + 1 + query[pos]].decode("ascii", "replace"))
        pos += 1 + query[pos]
    qtype, _qclass = struct.unpack("!HH", query[pos + 1:pos + 5])
    question = query[12:pos + 5]
    name = ".".join(labels).lower()
    with open(log, "a") as f:
        f.write(f"{name} {qtype}\n")
    if name not in names:
        return struct.pack("!HHHHHH", qid, 0x8183, qdcount, 0, 0, 0) + question
    if qtype != 1:
        return struct.pack("!HHHHHH", qid, 0x8180, qdcount, 0, 0, 0) + question
    rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 5, 4) + socket.inet_aton(names[name])
    return struct.pack("!HHHHHH", qid, 0x8180, qdcount, 1, 0, 0) + question + rr


class Udp(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        sock.sendto(answer(data), self.client_address)


class Tcp(socketserver.BaseRequestHandler):
    def handle(self):
        length = struct.unpack("!H", self.request.recv(2))[0]
        data = b""
        while len(data) < length:
            data += self.request.recv(length - len(data))
        reply = answer(data)
        self.request.sendall(struct.pack("!H", len(reply)) + reply)


socketserver.UDPServer.allow_reuse_address = True
socketserver.TCPServer.allow_reuse_address = True
udp = socketserver.ThreadingUDPServer((address, 53), Udp)
tcp = socketserver.ThreadingTCPServer((address, 53), Tcp)
threading.Thread(target=tcp.serve_forever, daemon=True).start()
print("ready", flush=True)
udp.serve_forever()
