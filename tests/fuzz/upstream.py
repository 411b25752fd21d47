"""A fake upstream that answers every request with a randomly damaged response: statuses
Ringside must pass through, retry or restate, Retry-After in every shape, bodies cut, framed
three ways (Content-Length, chunked, close), mutated heads, bytes and chunk frames, resets
before and inside the body, hangs. Usage: upstream.py PORT SEED"""
# A fake upstream answering every request with a randomly mutated response.
import random, socket, sys, threading, time, json, struct
PORT = int(sys.argv[1]); rnd = random.Random(int(sys.argv[2])); lock = threading.Lock()
def rb(n):
    with lock: return bytes(rnd.randrange(256) for _ in range(n))
def R(): 
    with lock: return rnd.random()
def C(x):
    with lock: return rnd.choice(x)
def I(a, b):
    with lock: return rnd.randrange(a, b)
def sse_openai():
    ev = []
    for i in range(I(0, 8)):
        ev.append(b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok%d"}}]}\n\n' % i)
    ev.append(C([b'data: [DONE]\n\n', b'', b'data: {"error":{"message":"x","type":"rate_limit_error"}}\n\n', b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"o"}}\n\n']))
    return b"".join(ev)
def sse_anthropic():
    ev = [b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{"input_tokens":3}}}\n\n']
    for i in range(I(0, 6)):
        ev.append(b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"t%d"}}\n\n' % i)
    ev.append(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    return b"".join(ev)
def mutate(b):
    bl = bytearray(b)
    for _ in range(I(1, 5)):
        op = I(0, 4)
        if op == 0 and bl: bl[I(0, len(bl))] = I(0, 256)
        elif op == 1: j = I(0, len(bl)+1); bl[j:j] = rb(I(1, 10))
        elif op == 2 and bl: j = I(0, len(bl)); del bl[j:j+I(1, 20)]
        else: j = I(0, len(bl)+1); bl[j:j] = C([b"\r\n", b"\n\n", b"\r", b"data: ", b": ping\n\n", b"\x00", b"\xff\xfe"])
    return bytes(bl)
def response(req):
    stream = b'"stream": true' in req or b'"stream":true' in req
    anth = b"/v1/messages" in req
    status = C([b"200 OK"]*60 + [b"429 Too Many Requests", b"500 Internal", b"503 x", b"529 Overloaded", b"400 Bad", b"404 N", b"408 T", b"999 X", b"200", b"099 Hm", b"100 Continue", b"204 No Content", b"304 NM"])
    hdrs = [b"content-type: " + (b"text/event-stream" if stream else b"application/json")]
    if R() < 0.3: hdrs.append(C([b"retry-after: 1", b"retry-after: -5", b"retry-after: 99999999999", b"retry-after: Wed, 21 Oct 2015 07:28:00 GMT", b"retry-after: abc", b"x-ratelimit-reset-requests: 1m30s", b"x-ratelimit-remaining-requests: 0", b"anthropic-ratelimit-requests-reset: 2030-01-01T00:00:00Z", b"retry-after-ms: 12", b"x-should-retry: false", b"connection: close", b"connection: keep-alive", b"content-encoding: gzip", b"x-request-id: up-1"]))
    if status.startswith(b"200"):
        body = (sse_anthropic() if anth else sse_openai()) if stream else (b'{"id":"x","type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1,"output_tokens":1}}' if anth else b'{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}')
    else:
        body = C([b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}', b'{"error":{"message":"overloaded"}}', b'not json', b''])
    if R() < 0.3: body = mutate(body)
    framing = C(["cl", "cl", "chunked", "chunked", "close", "badcl", "both"])
    if framing == "cl": hdrs.append(b"content-length: %d" % len(body)); wire = body
    elif framing == "badcl": hdrs.append(b"content-length: %d" % (len(body) + C([-3, 3, 1000]))); wire = body
    elif framing in ("chunked", "both"):
        hdrs.append(b"transfer-encoding: chunked")
        if framing == "both": hdrs.append(b"content-length: 5")
        parts = []; i = 0
        while i < len(body):
            k = I(1, 80); parts.append(b"%x\r\n" % k + body[i:i+k] + b"\r\n"); i += k
        wire = b"".join(parts) + b"0\r\n\r\n"
        if R() < 0.2: wire = mutate(wire)
    else: wire = body
    head = b"HTTP/1.1 " + status + b"\r\n" + b"".join(h + b"\r\n" for h in hdrs) + b"\r\n"
    if R() < 0.1: head = mutate(head)
    return head + wire, framing == "close"
def serve(c):
    # A damaged frame can leave Ringside waiting for bytes that never come: give up after 1 s
    # (Ringside then sees the close), so the run spends its time on answers, not waits.
    c.settimeout(1)
    try:
        while True:
            req = b""
            while b"\r\n\r\n" not in req:
                d = c.recv(65536)
                if not d: return
                req += d
            h, _, rest = req.partition(b"\r\n\r\n")
            cl = 0
            for line in h.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"): cl = int(line.split(b":")[1])
            while len(rest) < cl:
                d = c.recv(65536)
                if not d: return
                rest += d
            act = R()
            if act < 0.05: c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); c.close(); return
            if act < 0.07: time.sleep(C([0.3, 1])); return
            wire, close = response(req)
            if R() < 0.05: wire = wire[:I(0, len(wire)+1)]; close = True
            i = 0
            while i < len(wire):
                k = C([len(wire), I(1, 100)]); c.sendall(wire[i:i+k]); i += k
                if R() < 0.05: time.sleep(0.01)
            if R() < 0.03: c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); c.close(); return
            if close: c.close(); return
    except Exception as e:
        pass
    finally:
        try: c.close()
        except Exception: pass
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", PORT)); s.listen(256)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
