"""Parses a /metrics scrape with the Prometheus project's own parser and prints what it found.

Usage: parse_metrics.py FILE. Prints one JSON object: {"families": {name: type},
"samples": [[name, labels, value], ...]}. Exits non-zero (with the parser's error) on text
the parser refuses: the server's output must be valid OpenMetrics, not merely look like it.
"""

import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

text = open(sys.argv[1], encoding="utf-8").read()
families = {}
samples = []
for family in text_string_to_metric_families(text):
    families[family.name] = family.type
    for sample in family.samples:
        samples.append([sample.name, sample.labels, sample.value])
print(json.dumps({"families": families, "samples": samples}))
