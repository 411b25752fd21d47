"""Random methods, paths and JSON against the admin API (every documented endpoint, with odd
ids, queries and escapes), and random values for every settings and client field.
Usage: admin.py PORT SECONDS SEED

Every request must get an HTTP/1.1 answer within 10 s, never a 500. Prints a JSON summary;
exits 1 on any problem."""
import json, os, random, socket, sys, time

PORT, SECONDS, SEED = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(SEED)
TOKEN = os.environ.get("ADMIN_TOKEN", "")
FIELDS = ["id", "scopes", "tenant", "connections", "max_concurrent", "min_time_ms", "rpm", "tpm",
          "limit", "ttl_ms", "provider", "connection", "model", "budget", "reservoir", "global",
          "tenants", "keys", "on_saturation", "max_wait_ms", "priority"]


def value(depth=0):
    c = rnd.randrange(9 if depth < 2 else 7)
    if c == 7:
        return [value(depth + 1) for _ in range(rnd.randrange(3))]
    if c == 8:
        return {rnd.choice(FIELDS): value(depth + 1) for _ in range(rnd.randrange(4))}
    return [None, True, rnd.randrange(-2**63, 2**63), rnd.random() * 1e20, -1,
            "x" * rnd.randrange(0, 300), rnd.choice(["é", "\u0000", "../", "*", "", "oa/a1"])][c]


ENDPOINTS = [
    ("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics"), ("GET", "/admin/connections"),
    ("POST", "/admin/connections/oa/a1/reset"), ("POST", "/admin/connections/oa/nope/reset"),
    ("POST", "/admin/connections/oa/a1/reset/x"), ("GET", "/admin/model-cooldowns"),
    ("DELETE", "/admin/model-cooldowns?provider=oa&connection=a1"),
    ("DELETE", "/admin/model-cooldowns?provider=oa&connection=a1&model=%ff%fe"),
    ("DELETE", "/admin/model-cooldowns?provider=&connection=&model="),
    ("DELETE", "/admin/model-cooldowns"), ("GET", "/admin/breakers"),
    ("POST", "/admin/breakers/oa/reset"), ("POST", "/admin/breakers/%2e%2e/reset"),
    ("GET", "/admin/decisions?limit=-1"), ("GET", "/admin/decisions?limit=99999999999999999999999"),
    ("GET", "/admin/decisions?limit=abc"), ("GET", "/admin/decisions/"),
    ("GET", "/admin/decisions/%zz"), ("GET", "/admin/leases"), ("DELETE", "/admin/leases/" + "a" * 64),
    ("DELETE", "/admin/leases/zz"), ("DELETE", "/admin/leases/"), ("GET", "/admin/pins"),
    ("GET", "/admin/queues"), ("GET", "/admin/tenants"), ("GET", "/admin/settings"),
    ("PATCH", "/admin/settings"), ("GET", "/admin/clients"), ("POST", "/admin/clients"),
    ("DELETE", "/admin/clients/x"), ("DELETE", "/admin/clients/"), ("PUT", "/admin/settings"),
    ("GET", "/admin/" + "a" * 3000),
]

stats, problems = {}, []
deadline = time.time() + SECONDS
while time.time() < deadline:
    method, path = rnd.choice(ENDPOINTS)
    if rnd.random() < 0.8:
        body = json.dumps(value()).encode()
    else:
        body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(50)))
    # Mostly the operator; sometimes nobody, a wrong token (slowed down, so rarely), a foreign
    # Host (DNS rebinding) or another page's Origin.
    extra, r = "", rnd.random()
    if r < 0.85:
        extra = "authorization: Bearer %s\r\n" % TOKEN
    elif r < 0.87:
        extra = "authorization: Bearer wrong\r\n"
    elif r < 0.93:
        extra = "authorization: Bearer %s\r\norigin: http://evil.example\r\n" % TOKEN
    host = "evil.example" if rnd.random() < 0.03 else "127.0.0.1:%d" % PORT
    req = ("%s %s HTTP/1.1\r\nhost: %s\r\n%scontent-type: application/json\r\ncontent-length: %d\r\n"
           "connection: close\r\n\r\n" % (method, path, host, extra, len(body))).encode() + body
    s = socket.create_connection(("127.0.0.1", PORT))
    s.settimeout(10)
    try:
        s.sendall(req)
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        key = data[:12].decode("latin1") or "closed"
        stats[key] = stats.get(key, 0) + 1
        if not data.startswith(b"HTTP/1.1 ") or data.startswith(b"HTTP/1.1 500"):
            problems.append("%s %s %r -> %r" % (method, path[:80], body[:80], data[:200]))
    except socket.timeout:
        problems.append("no answer in 10 s: %s %s %r" % (method, path[:80], body[:80]))
    finally:
        s.close()
print(json.dumps({"answers": stats, "problems": problems[:10], "problem_count": len(problems)}))
sys.exit(1 if problems else 0)
