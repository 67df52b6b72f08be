"""A real `safex serve` for Python tests, modelled on tests/serve/serve_harness.cc: a private temp
dir (/tmp/pyserve-XXXX: not /tmp/safex-*, which the C++ leak checker counts as leaks) with a host
config whose `service { }` section points at a socket, a state dir, an audit log and a policies
dir holding the example policies (plus the `extra_policies` given). The daemon is the built
binary: $SAFEX_BINARY (CTest passes $<TARGET_FILE:safex>), else build/safex of this checkout.

    daemon = ServeFixture()
    daemon.start()            # waits for /v1/health
    ... SafexClient(daemon.socket) ...
    daemon.stop()             # SIGTERM, waits for the exit, removes the temp dir

Tests need root (the daemon runs sandboxes); require_root_or_skip() skips them with the reason
when not root, except under CI (env CI set), where that is a failure.
"""

import ctypes
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "clients", "python"))

from safex_client import SafexClient, SafexError  # noqa: E402

NOBODY = 65534

# As tests/support/test_host_config.h: no usable KVM on test hosts, so microVM plans for untrusted
# code may use TCG here (never on a real host).
TEST_BACKENDS = """  backends {
    gvisor { }
    microvm { tcg_for_untrusted = true }
    native { }
  }
"""

# Output files in a subdirectory and with names that need percent-encoding (the example
# policies deliver only /data/out/result.json). Extends the base, so nothing is loosened.
FILES_POLICY = """policy "pytest-files" extends "base-untrusted" {
  validate file "/data/out/*.txt" { max = 1KiB }
  validate file "/data/out/sub/*.txt" { max = 1KiB }
}
"""

# stdout checked as one JSON document: held until the run has ended (docs/api.md).
HELD_POLICY = """policy "pytest-held" extends "base-untrusted" {
  validate stdout {
    max = 1KiB
    json = true
  }
}
"""


def binary():
    return os.environ.get("SAFEX_BINARY") or os.path.join(SOURCE_DIR, "build", "safex")


def require_root_or_skip(test_case=None):
    """Skips (raises unittest.SkipTest) when the tests cannot run here: not root, or no built
    binary. Under CI (env CI set) either is a failure instead."""
    why = None
    if os.geteuid() != 0:
        why = "needs root: safex serve runs sandboxes (run as root, as CI does)"
    elif not os.access(binary(), os.X_OK):
        why = f"no safex binary at {binary()} (build it, or set SAFEX_BINARY)"
    if why is None:
        return
    if os.environ.get("CI"):
        raise AssertionError(why + " [CI is set: not skipped]")
    raise unittest.SkipTest(why)


# Every fixture not yet cleaned up. A test process ended by a signal (ctest's timeout, a
# developer's ^C or kill: SIGTERM goes to the whole process group, the daemon included) stops its
# daemons and removes their temp dirs first; otherwise a daemon killed with its test (the
# parent-death SIGKILL below) would leave its runs' sandboxes in a temp dir no later start
# recovers.
_LIVE = []


def _clean_up_and_die(signum, _frame):
    for fixture in list(_LIVE):
        fixture.cleanup(deadline=30.0)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _clean_up_on_signals():
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        if signal.getsignal(sig) is not _clean_up_and_die:
            signal.signal(sig, _clean_up_and_die)


def _die_with_parent():
    # PR_SET_PDEATHSIG = 1: the daemon gets SIGKILL if the test process dies without stopping it.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


class ServeFixture:
    def __init__(self, extra_service="", extra_policies=None, max_concurrent=4, max_queue=16,
                 request_timeout="5s", drain_timeout="20s"):
        _clean_up_on_signals()
        self.dir = tempfile.mkdtemp(prefix="pyserve-")
        _LIVE.append(self)
        # Other uids (the 65534 tests) must reach the socket inside.
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "safex.sock")
        self.state_dir = os.path.join(self.dir, "state")
        self.audit_db = os.path.join(self.dir, "audit.db")
        self.policy_dir = os.path.join(self.dir, "policies")
        self.config = os.path.join(self.dir, "host.policy")
        self.log_path = os.path.join(self.dir, "serve.log")
        self.proc = None
        self.exit_code = None
        os.mkdir(self.policy_dir, 0o755)
        for src in sorted(glob.glob(os.path.join(SOURCE_DIR, "policies", "examples",
                                                 "*.policy"))):
            shutil.copyfile(src, os.path.join(self.policy_dir, os.path.basename(src)))
        policies = {"pytest-files": FILES_POLICY, "pytest-held": HELD_POLICY}
        policies.update(extra_policies or {})
        for name, text in policies.items():
            with open(os.path.join(self.policy_dir, name + ".policy"), "w") as f:
                f.write(text)
        with open(self.config, "w") as f:
            f.write("host {\n" + TEST_BACKENDS + "  service {\n"
                    f'    policy_dir = "{self.policy_dir}"\n'
                    f'    socket = "{self.socket}"\n'
                    '    socket_mode = "0666"\n'
                    f'    state_dir = "{self.state_dir}"\n'
                    f'    audit_db = "{self.audit_db}"\n'
                    f"    max_concurrent = {max_concurrent}\n"
                    f"    max_queue = {max_queue}\n"
                    f"    request_timeout = {request_timeout}\n"
                    f"    drain_timeout = {drain_timeout}\n"
                    '    allow "*" { users = [0] }\n'
                    f'    allow "base-untrusted" {{ users = [{NOBODY}] }}\n'
                    + extra_service +
                    '  }\n  network { pool = "198.18.241.0/24" }\n}\n')

    def client(self, timeout=60.0):
        return SafexClient(self.socket, timeout=timeout)

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def start(self, timeout=60.0):
        """Starts the daemon and waits until /v1/health answers 200; raises with its log when
        it exits or does not become healthy."""
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                [binary(), "serve", "--config", self.config,
                 "--audit-key", os.path.join(self.dir, "audit.key")],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                preexec_fn=_die_with_parent, close_fds=True)
        finally:
            log.close()
        client = self.client(timeout=5.0)
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the daemon exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if client.health().get("status") == "ok":
                    return self
            except (SafexError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError("the daemon did not become healthy:\n" + self.log())

    def stop(self, sig=signal.SIGTERM, deadline=90.0):
        """Sends `sig`, waits for the exit (SIGKILL after `deadline` s) and returns the exit
        status (negative: killed by that signal)."""
        if self.proc is None or self.proc.poll() is not None:
            self.exit_code = None if self.proc is None else self.proc.returncode
            return self.exit_code
        self.proc.send_signal(sig)
        try:
            self.exit_code = self.proc.wait(deadline)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.exit_code = -signal.SIGKILL
        return self.exit_code

    def cleanup(self, deadline=90.0):
        """Stops the daemon if needed and removes the temp dir."""
        self.stop(deadline=deadline)
        shutil.rmtree(self.dir, ignore_errors=True)
        if self in _LIVE:
            _LIVE.remove(self)

    def as_uid(self, uid, fn):
        """Runs fn() in a forked child with uid and gid `uid` (no supplementary groups) and
        returns what it returns (pickled through a pipe). Exceptions come back as results:
        ("error", status, message) for SafexError, ("exception", repr) otherwise."""
        import pickle
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(r)
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                try:
                    out = ("ok", fn())
                except SafexError as e:
                    out = ("error", e.status, e.message)
                except BaseException as e:  # noqa: BLE001 - reported to the parent
                    out = ("exception", repr(e))
                data = pickle.dumps(out)
                while data:
                    n = os.write(w, data)
                    data = data[n:]
            except BaseException:  # noqa: BLE001
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        chunks = []
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)
        os.close(r)
        os.waitpid(pid, 0)
        if not chunks:
            return ("exception", "the child reported nothing")
        return pickle.loads(b"".join(chunks))
