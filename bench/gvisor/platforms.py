#!/usr/bin/env python3
"""gVisor's two platforms side by side: systrap (the default) and ptrace (docs/benchmarks.md,
"Warm pool", and docs/operating.md on choosing one for a pool).

In raw `runsc run` (no safex code), with a root like the driver's (an empty directory with /usr,
/lib, /lib64 and /bin bound read-only), interleaved so that the machine's load is the same for
both platforms, median of RUNS:
  1. the whole run's wall time and CPU (this process's waited-for children: runsc, the Sentry,
     the gofer and the platform's stub or traced processes) for `/bin/true`, `/bin/echo hi`,
     `python3 -c pass`, a Python that imports two modules and runs a subprocess, and one that
     makes 20,000 stat calls (syscall-bound);
  2. inside one sandbox, a static timer (exec_timer.c) that forks and execs `/bin/echo hi` six
     times: from the fork to the first output byte, the first exec and the later ones. A pooled
     run's time to first byte is mostly this (the launcher's exec of the program).
Root. Usage: bench/gvisor/platforms.py [RUNS]"""

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PLATFORMS = ["systrap", "ptrace"]
EXECS = 6
PROGRAMS = {
    "/bin/true": ["/bin/true"],
    "/bin/echo hi": ["/bin/echo", "hi"],
    "python3 -c pass": ["/usr/bin/python3", "-c", "pass"],
    "python3, imports and a subprocess": [
        "/usr/bin/python3", "-c", "import json, subprocess; subprocess.run(['/bin/true'])"],
    # Syscall-bound: where ptrace's two context switches per call show.
    "python3, 20,000 stat calls": [
        "/usr/bin/python3", "-c", "import os\nfor _ in range(20000): os.stat('/')"],
}


def make_bundle(work, name, argv, extra_binds=()):
    """A bundle whose root is an empty directory with the host's programs bound read-only."""
    bundle = os.path.join(work, name)
    os.makedirs(os.path.join(bundle, "rootfs"))
    binds = ["/usr", "/lib", "/lib64", "/bin"] + [dest for dest, _ in extra_binds]
    for d in binds + ["/tmp", "/proc", "/dev", "/etc"]:
        os.makedirs(os.path.join(bundle, "rootfs", d.lstrip("/")), exist_ok=True)
    subprocess.run(["runsc", "spec"], cwd=bundle, check=True, capture_output=True)
    path = os.path.join(bundle, "config.json")
    with open(path) as f:
        spec = json.load(f)
    spec["root"] = {"path": "rootfs", "readonly": True}
    spec["process"]["terminal"] = False
    spec["process"]["args"] = argv
    for d in ["/usr", "/lib", "/lib64", "/bin"]:
        spec["mounts"].append({"destination": d, "type": "bind", "source": d,
                               "options": ["rbind", "ro"]})
    for dest, source in extra_binds:
        spec["mounts"].append({"destination": dest, "type": "bind", "source": source,
                               "options": ["rbind", "ro"]})
    with open(path, "w") as f:
        json.dump(spec, f)
    return bundle


def one_run(work, bundle, name, platform):
    """(wall ms, children's CPU ms, stderr) of one `runsc run`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(["runsc", "--root=" + os.path.join(work, "state"), "--network=none",
                        "--platform=" + platform, "--overlay2=none", "run", "--bundle", bundle,
                        name], capture_output=True, text=True, timeout=120)
    wall = (time.monotonic() - t0) * 1e3
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e3
    if r.returncode != 0:
        raise SystemExit(f"{name}: runsc exited {r.returncode}: {r.stderr[-2000:]}")
    return wall, cpu, r.stderr


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    # /var/tmp: the timer is bound into the sandbox from here (not a tmpfs, like the driver's).
    work = tempfile.mkdtemp(prefix="sxbench-platforms-", dir="/var/tmp")
    try:
        os.chmod(work, 0o755)
        timer_dir = os.path.join(work, "timer")
        os.makedirs(timer_dir)
        os.chmod(timer_dir, 0o755)
        subprocess.run(["cc", "-O2", "-static", "-o", os.path.join(timer_dir, "exec_timer"),
                        os.path.join(HERE, "exec_timer.c")], check=True)
        bundles = {k: make_bundle(work, f"b{i}", argv) for i, (k, argv) in
                   enumerate(PROGRAMS.items())}
        timer = make_bundle(work, "timer-bundle",
                            ["/timer/exec_timer", "0", str(EXECS), "/bin/echo", "hi"],
                            [("/timer", timer_dir)])
        whole = {}
        first, later = {p: [] for p in PLATFORMS}, {p: [] for p in PLATFORMS}
        for i in range(runs):
            for p in PLATFORMS:
                for k, bundle in bundles.items():
                    wall, cpu, _ = one_run(work, bundle, f"sxplat-{p}-{i}-{len(whole)}", p)
                    whole.setdefault((k, p), []).append((wall, cpu))
                _, _, err = one_run(work, timer, f"sxplat-timer-{p}-{i}", p)
                times = [float(line.split()[2]) for line in err.splitlines()
                         if line.startswith("exec ")]
                if len(times) != EXECS:
                    raise SystemExit(f"timer on {p}: {err[-2000:]}")
                first[p].append(times[0])
                later[p].extend(times[1:])
        print(f"raw runsc run, median of {runs}, wall ms / CPU ms (runsc and its processes)")
        print("| program | " + " | ".join(PLATFORMS) + " | ptrace / systrap wall |")
        print("|---|" + "---|" * (len(PLATFORMS) + 1))
        for k in PROGRAMS:
            cells, walls = [], []
            for p in PLATFORMS:
                wall = statistics.median(x[0] for x in whole[(k, p)])
                cpu = statistics.median(x[1] for x in whole[(k, p)])
                walls.append(wall)
                cells.append(f"{wall:.1f} / {cpu:.1f}")
            print(f"| {k} | " + " | ".join(cells) + f" | {walls[1] / walls[0]:.2f}x |")
        print("\nfork + exec of /bin/echo to its first byte inside the sandbox, ms, median")
        print("| platform | first exec | later execs |")
        print("|---|---|---|")
        for p in PLATFORMS:
            print(f"| {p} | {statistics.median(first[p]):.1f} | {statistics.median(later[p]):.1f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
