#!/usr/bin/env python3
"""What idling costs a gVisor sandbox's next exec (docs/benchmarks.md, "Warm pool").

A warm pool's sandbox waits idle, then execs the program. This measures, in raw `runsc run`
(systrap, the platform safex uses, no safex code involved), the time from fork to the first
output byte of `/bin/echo hi` inside the sandbox, for the first and the later execs, in a
sandbox that execs at once (IDLE 0) and in one that first sleeps IDLE seconds, interleaved in one
run so that the machine's load is the same for both. Root. Usage:
    bench/gvisor/exec_after_idle.py [RUNS [IDLE_SECONDS]]"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EXECS = 6


def make_bundle(work, idle):
    bundle = os.path.join(work, f"bundle-{idle}")
    os.makedirs(bundle)
    subprocess.run(["runsc", "spec"], cwd=bundle, check=True, capture_output=True)
    path = os.path.join(bundle, "config.json")
    with open(path) as f:
        spec = json.load(f)
    spec["root"] = {"path": "/", "readonly": True}
    spec["process"]["terminal"] = False
    spec["process"]["args"] = [os.path.join(work, "exec_timer"), str(idle), str(EXECS),
                               "/bin/echo", "hi"]
    with open(path, "w") as f:
        json.dump(spec, f)
    return bundle


def one_run(work, bundle, name):
    """The per-exec first-byte times (ms) of one sandbox."""
    r = subprocess.run(["runsc", "--root=" + os.path.join(work, "state"), "--network=none",
                        "--platform=systrap", "--overlay2=none", "run", "--bundle", bundle, name],
                       capture_output=True, text=True, timeout=120)
    times = [float(line.split()[2]) for line in r.stderr.splitlines() if line.startswith("exec ")]
    if r.returncode != 0 or len(times) != EXECS:
        raise SystemExit(f"{name}: runsc exited {r.returncode}: {r.stderr[-2000:]}")
    return times


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    idle = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    # /tmp: the sandbox's root is the host's, read-only, so the timer must be in a path it sees.
    work = tempfile.mkdtemp(prefix="sxbench-idle-", dir="/tmp")
    try:
        os.chmod(work, 0o755)
        subprocess.run(["cc", "-O2", "-static", "-o", os.path.join(work, "exec_timer"),
                        os.path.join(HERE, "exec_timer.c")], check=True)
        bundles = {0: make_bundle(work, 0), idle: make_bundle(work, idle)}
        first = {0: [], idle: []}
        later = {0: [], idle: []}
        for i in range(runs):
            for k, bundle in bundles.items():
                times = one_run(work, bundle, f"sxidle-{k}-{i}-{os.getpid()}")
                first[k].append(times[0])
                later[k].extend(times[1:])
        print(f"fork to first byte of /bin/echo inside raw runsc, ms, median of {runs} sandboxes")
        print("| sandbox | first exec | later execs |")
        print("|---|---|---|")
        for k in bundles:
            print(f"| idle {k} s, then exec | {statistics.median(first[k]):.1f} | "
                  f"{statistics.median(later[k]):.1f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
