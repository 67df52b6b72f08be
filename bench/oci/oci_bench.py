#!/usr/bin/env python3
"""`ctr run --rm` of `/bin/busybox true` (the same static program in both) through safex-oci against the same through plain runsc, both under
containerd's stock runc shim, interleaved in one run (docs/benchmarks.md, "Kubernetes runtime").
The anchor is plain runsc under the same shim and the same private containerd
(tests/oci/test_containerd.py's), so the ratio is the figure; absolute times depend on the
machine. Root. Usage: bench/oci/oci_bench.py [RUNS]"""

import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "oci"))
sys.dont_write_bytecode = True

import test_containerd as t  # noqa: E402


def timed(c, cid, runc, argv):
    start = time.monotonic()
    r = c.run(cid, *argv, runc=runc)
    elapsed = time.monotonic() - start
    if r.returncode != 0:
        raise SystemExit(f"{cid} failed ({r.returncode}): {r.stderr}{c.read_log()}")
    return elapsed


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    t.require_or_skip()
    c = t.Containerd()
    try:
        c.start()
        timed(c, "warm-raw", t.RUNSC, ["/bin/busybox", "true"])  # first runs pay page-cache misses
        timed(c, "warm-safex", t.SAFEX_OCI, ["/bin/busybox", "true"])
        raw, safex = [], []
        for i in range(runs):
            raw.append(timed(c, f"raw{i}", t.RUNSC, ["/bin/busybox", "true"]))
            safex.append(timed(c, f"safex{i}", t.SAFEX_OCI, ["/bin/busybox", "true"]))
    finally:
        c.stop()
    p50_raw, p50_safex = statistics.median(raw), statistics.median(safex)
    print(f"runs: {runs} each, interleaved")
    print(f"ctr run via plain runsc:  p50 {p50_raw * 1000:.0f} ms  max {max(raw) * 1000:.0f} ms")
    print(f"ctr run via safex-oci:    p50 {p50_safex * 1000:.0f} ms  max {max(safex) * 1000:.0f} ms")
    print(f"ratio (p50): {p50_safex / p50_raw:.2f}x (goal at most 1.2x)")


if __name__ == "__main__":
    main()
