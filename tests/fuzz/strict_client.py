"""Valid requests through Ringside, read with a strict HTTP/1.1 parser, against a mutating
upstream (upstream.py). Usage: strict_client.py PORT SECONDS SEED

Every answer must be a well-framed response (Content-Length or chunked, chunk sizes and CRLFs
exact) or a connection closed inside a body (a cut: the upstream died mid-stream). Problems:
a broken chunk frame, a keep-alive connection closed before any answer, no answer within 60 s,
a head that is not HTTP/1.1. Prints a JSON summary; exits 1 on any problem."""
import json, random, socket, sys, time

PORT, SECONDS, SEED = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(SEED)
REQS = [
    ("/v1/chat/completions", {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/chat/completions", {"model": "smart", "stream": True, "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/messages", {"model": "claude-x", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/messages", {"model": "claude-x", "stream": True, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
]


class Cut(Exception):
    """The connection closed inside a body."""


class Problem(Exception):
    pass


def recv_more(s, buf, what):
    d = s.recv(65536)
    if not d:
        raise Cut(what)
    return buf + d


def read_response(s):
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(65536)
        if not d:
            if data:
                raise Cut("head")
            raise Problem("a keep-alive connection closed before any answer")
        data += d
    head, _, rest = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 "):
        raise Problem("not an HTTP/1.1 head: %r" % head[:80])
    status = int(head[9:12])
    fields = {}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        fields[name.strip().lower()] = value.strip()
    if status in (204, 304) or status < 200:
        if b"content-length" in fields and status == 204:
            raise Problem("a 204 with content-length")
        return status, fields, rest
    if b"content-length" in fields:
        n = int(fields[b"content-length"])
        while len(rest) < n:
            rest = recv_more(s, rest, "body")
        return status, fields, rest[n:]
    if fields.get(b"transfer-encoding") != b"chunked":
        raise Problem("neither content-length nor chunked: %r" % head[:200])
    pos = 0
    while True:
        while b"\r\n" not in rest[pos:]:
            rest = recv_more(s, rest, "chunk size")
        e = rest.index(b"\r\n", pos)
        try:
            n = int(rest[pos:e].split(b";")[0], 16)
        except ValueError:
            raise Problem("bad chunk size line %r" % rest[max(0, pos - 40):e + 10])
        if n == 0:
            while b"\r\n\r\n" not in rest[e:]:
                rest = recv_more(s, rest, "trailer")
            return status, fields, rest[rest.index(b"\r\n\r\n", e) + 4:]
        while len(rest) < e + 2 + n + 2:
            rest = recv_more(s, rest, "chunk")
        if rest[e + 2 + n:e + 4 + n] != b"\r\n":
            raise Problem("chunk of %d bytes not followed by CRLF: %r" % (n, rest[e + n - 20:e + n + 20]))
        pos = e + 4 + n


stats, problems = {}, []
s = None
previous = ""
deadline = time.time() + SECONDS
while time.time() < deadline:
    path, body = rnd.choice(REQS)
    b = json.dumps(body).encode()
    req = b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % (path.encode(), len(b)) + b
    reused = s is not None
    if s is None:
        s = socket.create_connection(("127.0.0.1", PORT))
        s.settimeout(60)
    try:
        s.sendall(req)
        status, fields, extra = read_response(s)
        if extra:
            raise Problem("%d bytes after a %d response" % (len(extra), status))
        key = str(status)
        previous = "%d %s" % (status, {k.decode(): v.decode("latin1")[:120] for k, v in fields.items() if k.startswith(b"x-ringside-attempts") or k == b"content-type"})
        if fields.get(b"connection") == b"close":
            s.close()
            s = None
    except Cut as e:
        key = "cut in " + str(e)
        s.close()
        s = None
    except (Problem, socket.timeout, ConnectionError) as e:
        key = type(e).__name__
        problems.append("%s (%s %s, %s connection; before it: %s)" % (e, path, "stream" if body.get("stream") else "json", "reused" if reused else "new", previous))
        s.close()
        s = None
    stats[key] = stats.get(key, 0) + 1
print(json.dumps({"answers": stats, "problems": problems[:10], "problem_count": len(problems)}))
sys.exit(1 if problems else 0)
