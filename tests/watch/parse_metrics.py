"""Parse a Prometheus text exposition (stdin) with the reference Python parser and print its
families as JSON: name, type, help, and samples (name, labels, value). A parse error exits 1."""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

families = []
for f in text_string_to_metric_families(sys.stdin.read()):
    families.append({
        "name": f.name,
        "type": f.type,
        "help": f.documentation,
        "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples],
    })
json.dump(families, sys.stdout)
