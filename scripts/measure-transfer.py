#!/usr/bin/env python3
"""Bytes on the wire and time for a domain's filter (each encoding: what a
replica's first sync and the page fetch) and for a page load of every domain
of a cluster, as Chromium asks for them (docs/BENCHMARKS.md 7). Times are
medians of repeated fetches on this machine (the server compressing, the
bytes crossing loopback); the time the same bytes take over slower links is
computed from their size.
  python3 scripts/measure-transfer.py [BASE_URL]   (default http://127.0.0.1:7701)"""
import json
import re
import statistics
import sys
import time
import urllib.request

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:7701"
CHROMIUM = "gzip, deflate, br, zstd"
REPEATS = 15
# A county archive's uplink and a provincial data centre's, in bits/s.
LINKS = {"10 Mbit/s": 10e6, "100 Mbit/s": 100e6}


def fetch(url, encoding):
    """The body as sent (urllib does not decompress) and its encoding."""
    request = urllib.request.Request(url, headers={"Accept-Encoding": encoding})
    with urllib.request.urlopen(request) as response:
        return response.read(), response.headers.get("Content-Encoding")


def timed(urls, encoding):
    """Bytes of one fetch of every URL in turn, and the median time of that."""
    times, size = [], 0
    for _ in range(REPEATS):
        start = time.perf_counter()
        size = sum(len(fetch(u, encoding)[0]) for u in urls)
        times.append(time.perf_counter() - start)
    return size, statistics.median(times)


def links(size):
    return "  ".join(f"{name}: {size * 8 / bps * 1000:>7.0f} ms" for name, bps in LINKS.items())


for encoding in ["identity", "gzip", "br", "zstd", CHROMIUM]:
    used = fetch(BASE + "/v1/filter", encoding)[1]
    size, seconds = timed([BASE + "/v1/filter"], encoding)
    print(f"/v1/filter  Accept-Encoding: {encoding:24s} -> {size:>9,} bytes ({used}), "
          f"loopback median {seconds * 1000:6.1f} ms;  {links(size)}")

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
wire, wire_s = timed(urls, CHROMIUM)
raw, raw_s = timed(urls, "identity")
print(f"page load of {len(cluster['domains'])} domains, {len(assets)} assets, fetched in turn:")
print(f"  uncompressed {raw:>9,} bytes, loopback median {raw_s * 1000:6.1f} ms;  {links(raw)}")
print(f"  compressed   {wire:>9,} bytes, loopback median {wire_s * 1000:6.1f} ms;  {links(wire)}")
