#!/usr/bin/env python3
"""Write an agent's turn as a chat request body: a ~32 KB conversation of code with escapes and
non-ASCII. Usage: agent_body.py OUT [--mixed]

By default non-ASCII is written as \\u escapes, as Python's json writes it; with --mixed every
other pair of messages keeps raw UTF-8 (as JavaScript's JSON.stringify writes it), so that both
forms are read. Used by benches/e2e.sh and tuning/pgo.sh."""
import json
import sys

out, mixed = sys.argv[1], "--mixed" in sys.argv[2:]
line = 'fn main() {\n    println!("naïve ünïcode ✓ {}", 42);\n}\t// a tool result line\n'
msgs = []
while sum(map(len, msgs)) < 32000:
    k = len(msgs)
    m = {"role": "user" if k % 2 == 0 else "assistant", "content": line * 6}
    msgs.append(json.dumps(m, ensure_ascii=not mixed or k % 4 < 2))
with open(out, "w") as f:
    f.write('{"model":"bench-model","messages":[%s]}' % ",".join(msgs))
