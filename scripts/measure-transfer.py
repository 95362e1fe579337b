#!/usr/bin/env python3
"""Bytes on the wire for a domain's filter (each encoding) and for a page load
of every domain of a cluster, as Chromium asks for them (docs/BENCHMARKS.md 7).
  python3 scripts/measure-transfer.py [BASE_URL]   (default http://127.0.0.1:7701)"""
import json
import re
import sys
import urllib.request

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:7701"
CHROMIUM = "gzip, deflate, br, zstd"


def fetch(url, encoding):
    """The body as sent (urllib does not decompress) and its encoding."""
    request = urllib.request.Request(url, headers={"Accept-Encoding": encoding})
    with urllib.request.urlopen(request) as response:
        return response.read(), response.headers.get("Content-Encoding")


for encoding in ["identity", "gzip", "br", "zstd", CHROMIUM]:
    body, used = fetch(BASE + "/v1/filter", encoding)
    print(f"/v1/filter  Accept-Encoding: {encoding:24s} -> {len(body):>9,} bytes ({used})")

# A page load: the page, its modules (followed through their imports), the
# cluster, and every domain's stats and filter.
urls = [BASE + "/"]
html = fetch(BASE + "/", "identity")[0].decode()
todo, assets = list(re.findall(r"/assets/[A-Za-z0-9_.-]+", html)), set()
while todo:
    asset = todo.pop()
    if asset not in assets:
        assets.add(asset)
        text = fetch(BASE + asset, "identity")[0].decode(errors="ignore")
        todo += ["/assets/" + m for m in re.findall(r"from '\./([A-Za-z0-9_.-]+)'", text)]
urls += [BASE + a for a in sorted(assets)] + [BASE + "/v1/cluster"]
cluster = json.loads(fetch(BASE + "/v1/cluster", "identity")[0])
for domain in cluster["domains"]:
    urls += [domain["address"] + "/v1/stats", domain["address"] + "/v1/filter"]
wire = sum(len(fetch(u, CHROMIUM)[0]) for u in urls)
raw = sum(len(fetch(u, "identity")[0]) for u in urls)
print(f"page load of {len(cluster['domains'])} domains: {wire:,} bytes on the wire "
      f"({raw:,} uncompressed), {len(assets)} assets")
