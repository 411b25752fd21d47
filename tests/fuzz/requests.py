"""Damaged client requests against Ringside (in front of the simulator): mutated methods,
paths, versions, heads, headers (smuggling pairs, credentials, Ringside's own), JSON bodies
and chunk frames; wrong Content-Lengths; pipelining; random write splits; half-closes.
Usage: requests.py PORT SECONDS SEED

Model names come from the intake's edge cases too (control characters, CR/LF with a header
behind them, 2 KB names, `relay/...` names that become the route header).

Every connection must get an HTTP/1.1 answer, or be closed, within 15 s. Problems: no answer
in time, an answer that is not HTTP/1.1, and any response head with a byte Ringside did not mean
to write (a header line that is not `token: value` without control bytes, or a header a client
string tried to inject). Prints a JSON summary; exits 1 on any problem."""
import random, re, socket, sys, time, json
PORT = int(sys.argv[1]); SECONDS = float(sys.argv[2]); seed = int(sys.argv[3])
rnd = random.Random(seed)
bodies = [
 ('/v1/chat/completions', {"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}),
 ('/v1/chat/completions', {"model":"smart","stream":True,"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":True}}),
 ('/v1/messages', {"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}),
 ('/v1/messages', {"model":"claude-x","stream":True,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}),
 ('/v1/responses', {"model":"gpt-x","input":"hi","stream":True}),
 ('/v1/embeddings', {"model":"emb-x","input":"hi"}),
 ('/v1/completions', {"model":"oa/gpt-x","prompt":"hi"}),
 ('/v1/messages/count_tokens', {"model":"claude-x","messages":[{"role":"user","content":"hi"}]}),
]
nasty_models = ["relay/gpt-x\r\nx-injected: 1", "relay/a\nSet-Cookie: owned=1", "relay/\u0000x",
                "relay/\u007f", "relay/\u0085", "relay/" + "m" * 2048, "", "relay/模型",
                "relay/a\r\n\r\nHTTP/1.1 200 OK\r\nx-injected: 2\r\n\r\n", "relay/gpt-x\t1",
                "oa/gpt-x\r\nx-injected: 3"]
HEADER_LINE = re.compile(rb"^[!#$%&'*+.^_`|~0-9A-Za-z-]+: [^\x00-\x08\x0a-\x1f\x7f]*$")
junk_headers = [b"x-ringside-session", b"x-session-id", b"authorization", b"x-api-key", b"anthropic-version", b"transfer-encoding", b"content-length", b"connection", b"expect", b"traceparent", b"x-request-id", b"host", b"upgrade", b"te", b"x-ringside-deadline-ms", b"x-ringside-tenant", b"x-ringside-priority", b"content-type", b"accept-encoding"]
def rbytes(n): return bytes(rnd.randrange(256) for _ in range(n))
def build():
    path, body = rnd.choice(bodies)
    if rnd.random() < 0.15:
        body = dict(body, model=rnd.choice(nasty_models))
    b = json.dumps(body).encode()
    method = b"POST"
    if rnd.random() < 0.1: method = rnd.choice([b"GET", b"PUT", b"DELETE", b"HEAD", b"OPTIONS", b"PO ST", b"", b"G\x00T"])
    if rnd.random() < 0.1: path = rnd.choice(['/v1/models', '/v1/models/gpt-x', '/v1/models/oa/gpt-x', '/', '*', '/v1/../etc', '/v1/chat/completions?x=1', '/%zz', 'http://x/v1/chat/completions'])
    chunked = rnd.random() < 0.3
    hdrs = [(b"host", b"x"), (b"content-type", b"application/json"), (b"authorization", b"Bearer sk-client")]
    for _ in range(rnd.randrange(4)):
        hdrs.append((rnd.choice(junk_headers), rnd.choice([b"1", b"-1", b"chunked", b"gzip, chunked", b"close", b"100-continue", b"00-" + b"a"*32 + b"-" + b"b"*16 + b"-01", rbytes(rnd.randrange(1, 20)), b"9"*30, b" ", b"", str(rnd.randrange(0, 300)).encode()])))
    if rnd.random() < 0.2:
        # mutate body json
        bl = bytearray(b)
        for _ in range(rnd.randrange(1, 6)):
            op = rnd.randrange(4)
            if op == 0 and bl: bl[rnd.randrange(len(bl))] = rnd.randrange(256)
            elif op == 1: bl[rnd.randrange(len(bl)+1):rnd.randrange(len(bl)+1)] = rbytes(rnd.randrange(1, 8))
            elif op == 2 and bl: i = rnd.randrange(len(bl)); del bl[i:i+rnd.randrange(1, 10)]
            else: bl += rnd.choice([b'"model":"x"', b'\xff', b'{', b'}', b'\\u0000', b'"stream":1'])
        b = bytes(bl)
    if chunked:
        hdrs.append((b"transfer-encoding", b"chunked"))
        parts = []; i = 0
        while i < len(b):
            k = rnd.randrange(1, 40); parts.append(b"%x\r\n" % k + b[i:i+k] + b"\r\n"); i += k
        if parts and rnd.random() < 0.3:
            j = rnd.randrange(len(parts)); parts[j] = rnd.choice([b"zz\r\n", b"-1\r\n", b"ffffffffffffffffff\r\n", b"1;ext=1\r\na\r\n", b"1\r\nab\r\n", b"\r\n", b"0\r\n"])
        bodyb = b"".join(parts) + rnd.choice([b"0\r\n\r\n", b"0\r\nx-trailer: 1\r\n\r\n", b"0\r\n", b""])
    else:
        hdrs.append((b"content-length", str(len(b) + rnd.choice([0,0,0,0,-1,1,5,-5])).encode()))
        bodyb = b
    rnd.shuffle(hdrs)
    version = b"HTTP/1.1" if rnd.random() < 0.9 else rnd.choice([b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1.", b"HTTP/1.1 x", b""])
    head = method + b" " + path.encode() + b" " + version + b"\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in hdrs) + b"\r\n"
    if rnd.random() < 0.1:
        hl = bytearray(head)
        for _ in range(rnd.randrange(1, 4)):
            i = rnd.randrange(len(hl)); hl[i] = rnd.choice([0, 10, 13, 32, 58, 127, 255, rnd.randrange(256)])
        head = bytes(hl)
    return head + bodyb
def bad_heads(data, req):
    """Every response head in `data` (pipelined answers included, found by their status lines):
    header lines must be well-formed and none may be one a client string tried to inject."""
    out = []
    for m in re.finditer(rb"HTTP/1\.1 \d{3}[^\r\n]*\r\n", data):
        end = data.find(b"\r\n\r\n", m.end() - 2)
        head = data[m.end():end] if end >= 0 else b""
        for line in head.split(b"\r\n") if head else []:
            low = line.lower()
            if not HEADER_LINE.match(line) or low.startswith(b"x-injected") or low.startswith(b"set-cookie"):
                out.append("bad header line %r in an answer to %r" % (line[:120], req[:200]))
    return out

stats, problems = {}, []
deadline = time.time() + SECONDS
while time.time() < deadline:
    req = build()
    if rnd.random() < 0.1:
        req = req + build()  # pipelined
    s = socket.create_connection(("127.0.0.1", PORT))
    s.settimeout(15)
    try:
        i = 0
        while i < len(req):
            k = rnd.choice([len(req), rnd.randrange(1, 64)])
            s.sendall(req[i:i + k])
            i += k
        if rnd.random() < 0.7:
            s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            try:
                d = s.recv(65536)
            except socket.timeout:
                problems.append("no answer in 15 s to %r (got %r)" % (req[:200], data[:100]))
                break
            except ConnectionResetError:
                break
            if not d:
                break
            data += d
        key = data[:12].decode("latin1") if data else "closed"
        stats[key] = stats.get(key, 0) + 1
        if data and not data.startswith(b"HTTP/1.1 "):
            problems.append("not HTTP/1.1: %r to %r" % (data[:100], req[:200]))
        problems.extend(bad_heads(data, req))
    except (BrokenPipeError, ConnectionResetError):
        stats["reset while sending"] = stats.get("reset while sending", 0) + 1
    finally:
        s.close()
print(json.dumps({"answers": stats, "problems": problems[:10], "problem_count": len(problems)}))
sys.exit(1 if problems else 0)
