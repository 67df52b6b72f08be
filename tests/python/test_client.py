"""clients/python/safex_client.py against a real `safex serve` (tests/python/serve_fixture.py):
runs, streaming, cancellation, output files, idempotency, other callers, bad inputs. The first
class needs no daemon (the client's own checks)."""

import glob
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import serve_fixture  # noqa: E402
from safex_client import (RunHandle, SafexClient, SafexError, check_file_name)  # noqa: E402

UNKNOWN_RUN = "01900000-0000-7000-8000-000000000000"


class ClientChecksTest(unittest.TestCase):
    """What the client refuses by itself, before any byte is written."""

    def test_unsafe_names_are_refused(self):
        for name in ["", "..", ".", "../x", "a/../b", "a//b", "/etc/passwd", "a/", "x\0y",
                     "./a"]:
            with self.subTest(name=name), self.assertRaises(ValueError):
                check_file_name(name)
        for name in ["a", "a b%.txt", "sub/c.txt", "..a", "a..", "...", "a/.b"]:
            with self.subTest(name=name):
                self.assertEqual(check_file_name(name), name)

    def test_download_checks_every_name_before_writing(self):
        class Listed(RunHandle):
            files = [{"name": "fine.txt", "size": 1, "sha256": "0" * 64},
                     {"name": "../escape.txt", "size": 1, "sha256": "0" * 64}]

        handle = Listed(SafexClient("/nonexistent.sock"), "r")
        with tempfile.TemporaryDirectory(prefix="pyclient-") as dest:
            with self.assertRaises(ValueError):
                handle.download(dest)
            self.assertEqual(os.listdir(dest), [])


class DaemonTest(unittest.TestCase):
    """Against a real daemon (root; skipped otherwise unless CI is set)."""

    daemon = None

    @classmethod
    def setUpClass(cls):
        serve_fixture.require_root_or_skip()
        cls.daemon = serve_fixture.ServeFixture()
        try:
            cls.daemon.start()
        except BaseException:
            cls.daemon.cleanup()
            raise
        cls.client = cls.daemon.client()

    @classmethod
    def tearDownClass(cls):
        if cls.daemon is None:
            return
        code = cls.daemon.stop()
        log = cls.daemon.log()
        cls.daemon.cleanup()
        if code != 0:
            raise AssertionError(f"safex serve exited with {code} after SIGTERM:\n{log[-4000:]}")

    def fail_with_log(self, msg):
        self.fail(f"{msg}\n--- serve.log (tail) ---\n{self.daemon.log()[-3000:]}")

    # --- runs -----------------------------------------------------------------------------

    def test_run_and_wait(self):
        handle = self.client.run("python-untrusted", ["python3", "-c", "print(6 * 7)"])
        self.assertTrue(handle.run_id)
        self.assertIn(handle.accepted.get("state"), ("queued", "running"), handle.accepted)
        self.assertTrue(handle.accepted["links"], handle.accepted)
        result = handle.wait(timeout=120)
        self.assertEqual(result.verdict, "ok", result.raw)
        self.assertEqual(result.exit_status, 0)
        self.assertEqual(result.stdout, "42\n")
        self.assertEqual(result.run_id, handle.run_id)
        self.assertEqual(result["policy"], "python-untrusted")
        state = self.client.get(handle.run_id)
        self.assertEqual(state["state"], "finished", state)
        self.assertEqual(state["result"]["verdict"], "ok")
        self.assertEqual(state["uid"], 0)
        self.assertFalse(state["cancel_requested"])
        self.assertIn(handle.run_id, [r["run_id"] for r in self.client.list_runs(limit=1000)])

    def test_stdin_and_input_files(self):
        program = ("import sys\nprint(sys.stdin.read().upper())\n"
                   "print(open('/data/in/numbers.txt').read().split())\n")
        result = self.client.run(
            "python-untrusted", ["python3", "/data/in/main.py"], stdin=b"hello",
            files={"main.py": program, "numbers.txt": b"1 2 3\n"}).wait(timeout=120)
        self.assertEqual(result.verdict, "ok", result.raw)
        self.assertEqual(result.stdout, "HELLO\n['1', '2', '3']\n")

    def test_stdout_streams_before_the_end(self):
        # base-untrusted: one line-by-line validator on stdout, so it is live (docs/api.md).
        chunks = []
        program = ("import time\nprint('first', flush=True)\ntime.sleep(1)\n"
                   "print('second', flush=True)\n")
        handle = self.client.run(
            "base-untrusted", ["/usr/bin/python3", "-c", program],
            on_stdout=lambda data: chunks.append((time.monotonic(), data)))
        ended = time.monotonic()
        self.assertIsNotNone(handle.result, "run() with callbacks returns after the result")
        self.assertEqual(handle.result.verdict, "ok", handle.result.raw)
        self.assertEqual("".join(d for _, d in chunks), "first\nsecond\n")
        self.assertEqual(handle.result.stdout, "first\nsecond\n")
        first_at = chunks[0][0]
        self.assertIn("first", chunks[0][1])
        self.assertGreaterEqual(ended - first_at, 0.5,
                                f"the first line arrived only {ended - first_at:.3f} s before "
                                "the result: not streamed")

        events = list(handle.events())
        self.assertEqual([e["seq"] for e in events], list(range(len(events))))
        self.assertEqual(events[0]["type"], "state")
        self.assertEqual(events[-1]["type"], "result")
        self.assertEqual(events[-1]["result"]["run_id"], handle.run_id)
        self.assertIn("running", [e.get("state") for e in events if e["type"] == "state"])
        # Resuming at any seq gives exactly the rest.
        for k in (1, len(events) - 1):
            self.assertEqual(list(handle.events(from_seq=k)), events[k:])

    def test_a_held_stream_comes_at_the_end_with_a_notice(self):
        # pytest-held checks stdout as one JSON document: held until the run has ended.
        arrivals = []
        program = ("import time\nprint('{\"a\":', flush=True)\ntime.sleep(1)\n"
                   "print('1}', flush=True)\n")
        handle = self.client.run("pytest-held", ["/usr/bin/python3", "-c", program],
                                 on_event=lambda e: arrivals.append((time.monotonic(), e)))
        self.assertEqual(handle.result.verdict, "ok", handle.result.raw)
        kinds = [e["type"] for _, e in arrivals]
        notices = [e for _, e in arrivals if e["type"] == "notice"]
        self.assertTrue(any(n.get("stream") == "stdout" for n in notices), kinds)
        self.assertLess(kinds.index("notice"), kinds.index("stdout"), kinds)
        first_out = next(t for t, e in arrivals if e["type"] == "stdout")
        self.assertLess(arrivals[-1][0] - first_out, 0.5, "stdout came before the end")
        self.assertEqual(handle.result.stdout, '{"a":\n1}\n')

    def test_result_stream_is_the_events_stream(self):
        # Bytes that are not UTF-8: the events carry data_base64, the result delivered_base64,
        # and both say the same bytes.
        got = []
        handle = self.client.run("base-untrusted",
                                 ["/bin/sh", "-c", r"printf 'a\377b\n'; printf 'plain\n'"],
                                 on_stdout=got.append)
        result = handle.result
        self.assertEqual(result.verdict, "ok", result.raw)
        joined = b"".join(g if isinstance(g, bytes) else g.encode() for g in got)
        out = result.stdout if isinstance(result.stdout, bytes) else result.stdout.encode()
        self.assertEqual(joined, out)
        self.assertTrue(out.endswith(b"plain\n"), out)

    def test_wall_time_ms_shortens_never_lengthens(self):
        t0 = time.monotonic()
        result = self.client.run("base-untrusted", ["/bin/sleep", "20"],
                                 wall_time_ms=1000).wait(timeout=120)
        self.assertEqual(result.verdict, "timeout", result.raw)
        self.assertEqual(result.exit_status, 124)
        self.assertLess(time.monotonic() - t0, 15)
        # More than the policy's 10 s: refused after admission, the result carries the 400.
        refused = self.client.run("python-untrusted", ["python3", "-c", "pass"],
                                  wall_time_ms=3600_000).wait(timeout=60)
        self.assertEqual((refused.verdict, refused.exit_status), ("refused", 125), refused.raw)
        self.assertEqual(refused.error["status"], 400)
        self.assertIn("wall_time_ms", refused.reason)

    # --- cancel ---------------------------------------------------------------------------

    def test_cancel_a_running_run(self):
        # Cancelled once its program has printed, so the sandbox is surely up (the `running`
        # state event comes before the sandbox is made).
        handle = self.client.run("base-untrusted", ["/bin/sh", "-c", "echo started; exec sleep 30"])
        for event in handle.events(timeout=60):
            if event["type"] == "stdout":
                break
        t0 = time.monotonic()
        answer = handle.cancel()
        self.assertEqual(answer["run_id"], handle.run_id)
        self.assertIs(answer["cancel_requested"], True)
        result = handle.wait(timeout=60)
        self.assertEqual(result.verdict, "interrupted", result.raw)
        self.assertEqual(result.exit_status, 130)
        self.assertLess(time.monotonic() - t0, 20)
        self.assertTrue(self.client.get(handle.run_id)["cancel_requested"])
        with self.assertRaises(SafexError) as cm:
            handle.cancel()
        self.assertEqual(cm.exception.status, 409)

    # --- files ----------------------------------------------------------------------------

    def test_output_file_list_fetch_download(self):
        data = b'{"answer": 42}'
        handle = self.client.run(
            "python-untrusted",
            ["python3", "-c", f"open('/data/out/result.json', 'wb').write({data!r})"])
        self.assertEqual(handle.wait(timeout=120).verdict, "ok", handle.result.raw)
        sha = hashlib.sha256(data).hexdigest()
        self.assertEqual(handle.files, [{"name": "result.json", "size": len(data), "sha256": sha}])
        self.assertTrue(handle.list_files().get("expires_at"))
        self.assertEqual(handle.fetch("result.json"), data)
        with tempfile.TemporaryDirectory(prefix="pyclient-") as dest:
            self.assertEqual(handle.download(dest), ["result.json"])
            path = os.path.join(dest, "result.json")
            with open(path, "rb") as f:
                self.assertEqual(f.read(), data)
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
            # An existing name is never overwritten.
            with open(path, "wb") as f:
                f.write(b"mine")
            with self.assertRaises(FileExistsError):
                handle.download(dest)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), b"mine")

        # Names that are not a listed file's: 4xx, never another file.
        for name in ["..", ".", "\0", "result.json\0", "/etc/passwd", "./result.json",
                     "x/../result.json", "result.json/", "nope.json", "../../../etc/passwd"]:
            with self.subTest(name=name), self.assertRaises(SafexError) as cm:
                handle.fetch(name)
            self.assertIn(cm.exception.status // 100, (4,), (name, cm.exception.status))
        # Raw targets, unencoded by the client.
        for target in ["/files/..", "/files/%2e%2e", "/files/%00", "/files//etc/passwd",
                       "/files/%2Fetc%2Fpasswd", "/files/result.json%00"]:
            with self.subTest(target=target):
                resp, _ = self._raw("GET", f"/v1/runs/{handle.run_id}{target}")
                self.assertIn(resp.status // 100, (4,), (target, resp.status))

    def _raw(self, method, path):
        conn, resp = self.client._open(method, path)
        try:
            return resp, resp.read()
        finally:
            conn.close()

    def test_names_in_a_subdirectory_and_percent_encoded(self):
        script = ("mkdir -p /data/out/sub && printf hi > '/data/out/a b%.txt' && "
                  "printf there > /data/out/sub/c.txt")
        handle = self.client.run("pytest-files", ["/bin/sh", "-c", script])
        self.assertEqual(handle.wait(timeout=120).verdict, "ok", handle.result.raw)
        self.assertEqual(sorted(f["name"] for f in handle.files), ["a b%.txt", "sub/c.txt"])
        self.assertEqual(handle.fetch("a b%.txt"), b"hi")
        self.assertEqual(handle.fetch("sub/c.txt"), b"there")
        with tempfile.TemporaryDirectory(prefix="pyclient-") as dest:
            self.assertEqual(sorted(handle.download(dest)), ["a b%.txt", "sub/c.txt"])
            with open(os.path.join(dest, "sub", "c.txt"), "rb") as f:
                self.assertEqual(f.read(), b"there")
        # A symlink where a directory goes is never followed; what was written is taken back.
        with tempfile.TemporaryDirectory(prefix="pyclient-") as dest, \
                tempfile.TemporaryDirectory(prefix="pyclient-elsewhere-") as elsewhere:
            os.symlink(elsewhere, os.path.join(dest, "sub"))
            with self.assertRaises(OSError):
                handle.download(dest)
            self.assertEqual(os.listdir(elsewhere), [])
            self.assertEqual(os.listdir(dest), ["sub"])

    # --- idempotency, other callers, bad inputs -------------------------------------------

    def test_idempotency_key_returns_the_same_run(self):
        key = "pytest-" + uuid.uuid4().hex
        argv = ["python3", "-c", "print('once')"]
        first = self.client.run("python-untrusted", argv, idempotency_key=key)
        second = self.client.run("python-untrusted", argv, idempotency_key=key)
        self.assertEqual(first.run_id, second.run_id)
        self.assertEqual(second.wait(timeout=120).stdout, "once\n")
        third = self.client.run("python-untrusted", argv, idempotency_key=key)
        self.assertEqual(third.run_id, first.run_id, "also after the run has ended")
        with self.assertRaises(SafexError) as cm:
            self.client.run("python-untrusted", ["python3", "-c", "print('other')"],
                            idempotency_key=key)
        self.assertEqual(cm.exception.status, 409)
        other = self.client.run("python-untrusted", argv, idempotency_key=key + "-2")
        self.assertNotEqual(other.run_id, first.run_id)
        other.wait(timeout=120)

    def test_another_uid_gets_404(self):
        data = b'{"a": 1}'
        handle = self.client.run(
            "python-untrusted",
            ["python3", "-c", f"open('/data/out/result.json', 'wb').write({data!r})"])
        handle.wait(timeout=120)
        sock = self.daemon.socket
        run_id = handle.run_id

        def as_nobody():
            c = SafexClient(sock)
            h = c.handle(run_id)
            out = {}
            for name, call in [("get", lambda: c.get(run_id)), ("cancel", h.cancel),
                               ("events", lambda: list(h.events())),
                               ("files", lambda: h.files),
                               ("fetch", lambda: h.fetch("result.json"))]:
                try:
                    call()
                    out[name] = 200
                except SafexError as e:
                    out[name] = e.status
            out["listed"] = run_id in [r.get("run_id") for r in c.list_runs(limit=1000)]
            return out

        kind, *rest = self.daemon.as_uid(serve_fixture.NOBODY, as_nobody)
        self.assertEqual(kind, "ok", rest)
        self.assertEqual(rest[0], {"get": 404, "cancel": 404, "events": 404, "files": 404,
                                   "fetch": 404, "listed": False})
        # Still there for its owner.
        self.assertEqual(self.client.get(run_id)["run_id"], run_id)

    def test_bad_inputs(self):
        calls = {"get": lambda: self.client.get(UNKNOWN_RUN),
                 "get malformed id": lambda: self.client.get("nope"),
                 "cancel": lambda: self.client.handle(UNKNOWN_RUN).cancel(),
                 "events": lambda: list(self.client.handle(UNKNOWN_RUN).events()),
                 "files": lambda: self.client.handle(UNKNOWN_RUN).files,
                 "fetch": lambda: self.client.handle(UNKNOWN_RUN).fetch("result.json")}
        for what, call in calls.items():
            with self.subTest(what):
                with self.assertRaises(SafexError) as cm:
                    call()
                self.assertEqual(cm.exception.status, 404, cm.exception.body)
                self.assertEqual(cm.exception.body["error"]["status"], 404)
        for kwargs in [dict(policy="Bad/Name", argv=["true"]),
                       dict(policy="base-untrusted", argv=[]),
                       dict(policy="base-untrusted", argv=["a\0b"])]:
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(SafexError) as cm:
                    self.client.run(**kwargs)
                self.assertEqual(cm.exception.status, 400, cm.exception.body)

    def test_unknown_policy(self):
        # Admitted with "wait": false (the policy is looked up by the worker), then refused:
        # the result carries the 404.
        result = self.client.run("no-such-policy", ["true"]).wait(timeout=60)
        self.assertEqual((result.verdict, result.exit_status), ("refused", 125), result.raw)
        self.assertEqual(result.error["status"], 404)

    def test_health(self):
        h = self.client.health()
        self.assertEqual(h["status"], "ok")
        self.assertEqual(h["audit_log"], "ok")
        self.assertIn("safex_runs_started_total", self.client.metrics())



class InterruptedTestTest(unittest.TestCase):
    """A test process ended by SIGTERM while its daemon runs a program (ctest's timeout, a
    developer's kill) stops the daemon and removes its temp dir: nothing of the run is left."""

    CHILD = (
        "import sys, time\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "import serve_fixture\n"
        "d = serve_fixture.ServeFixture(drain_timeout='2s')\n"
        "d.start()\n"
        "h = d.client().run('base-untrusted', ['sleep', '60'])\n"
        "while d.client().get(h.run_id).get('state') != 'running':\n"
        "    time.sleep(0.05)\n"
        "print(d.dir, h.run_id, flush=True)\n"
        "time.sleep(120)\n")

    def test_sigterm_leaves_nothing(self):
        serve_fixture.require_root_or_skip()
        child = subprocess.Popen([sys.executable, "-c", self.CHILD,
                                  os.path.dirname(os.path.abspath(__file__))],
                                 stdout=subprocess.PIPE, text=True)
        try:
            line = child.stdout.readline().split()
            self.assertEqual(len(line), 2, "the child did not start its run")
            temp_dir, run_id = line
            self.assertTrue(os.path.isdir(temp_dir))
            child.send_signal(signal.SIGTERM)
            self.assertEqual(child.wait(60), -signal.SIGTERM)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        self.assertFalse(os.path.exists(temp_dir), "the interrupted test's temp dir is left")
        left = glob.glob(f"/sys/fs/cgroup/*/safex/{run_id}") + glob.glob(
            f"/sys/fs/cgroup/safex/{run_id}")
        self.assertEqual(left, [], "the run's cgroup is left")


class RestartTest(unittest.TestCase):
    """Runs from before a restart are answered from the audit log."""

    def test_a_run_from_before_a_restart(self):
        serve_fixture.require_root_or_skip()
        daemon = serve_fixture.ServeFixture()
        try:
            daemon.start()
            client = daemon.client()
            run_id = client.run("python-untrusted", ["python3", "-c", "print(1)"]).wait(120).run_id
            self.assertEqual(daemon.stop(), 0, daemon.log()[-3000:])
            daemon.start()
            state = client.get(run_id)
            self.assertEqual(state.get("source"), "audit", state)
            self.assertEqual(state["verdict"], "ok")
            self.assertNotIn("result", state)
            listed = [r for r in client.list_runs(100) if r["run_id"] == run_id]
            self.assertEqual([r.get("source") for r in listed], ["audit"], listed)
            result = client.handle(run_id).wait(timeout=30)
            self.assertEqual(result.verdict, "ok", result.raw)
            self.assertEqual(daemon.stop(), 0, daemon.log()[-3000:])
        finally:
            daemon.cleanup()


class RetentionTest(unittest.TestCase):
    """Output files are kept for results_ttl and within results_max_bytes; then 410."""

    def start(self, extra):
        serve_fixture.require_root_or_skip()
        daemon = serve_fixture.ServeFixture(extra_service=extra)
        self.addCleanup(daemon.cleanup)
        daemon.start()
        return daemon.client()

    def write(self, client, data):
        h = client.run("python-untrusted",
                       ["python3", "-c", f"open('/data/out/result.json', 'w').write({data!r})"])
        self.assertEqual(h.wait(timeout=120).verdict, "ok", h.result.raw)
        return h

    def assert_gone(self, handle, deadline_s):
        until = time.monotonic() + deadline_s
        while True:
            try:
                handle.files
            except SafexError as e:
                self.assertEqual(e.status, 410, e.body)
                break
            self.assertLess(time.monotonic(), until, "the files are still listed")
            time.sleep(0.2)
        with self.assertRaises(SafexError) as cm:
            handle.fetch("result.json")
        self.assertEqual(cm.exception.status, 410, cm.exception.body)

    def test_the_oldest_files_go_past_results_max_bytes(self):
        client = self.start("    results_max_bytes = 20B\n")
        old = self.write(client, "[1, 2, 3, 4, 5, 6]")  # 18 bytes
        new = self.write(client, "[7, 8, 9]")  # 9 bytes: 27 > 20, the older ones go
        self.assert_gone(old, 10)
        self.assertEqual(new.fetch("result.json"), b"[7, 8, 9]")
        self.assertEqual(client.get(old.run_id)["state"], "finished", "the run is still held")

    def test_a_run_past_results_ttl(self):
        # No longer held: files and events 410, cancel 409, GET from the audit log.
        client = self.start("    results_ttl = 1s\n")
        h = self.write(client, "[1]")
        self.assertEqual(h.fetch("result.json"), b"[1]")
        self.assert_gone(h, 10)
        with self.assertRaises(SafexError) as cm:
            list(client.handle(h.run_id).events())
        self.assertEqual(cm.exception.status, 410, cm.exception.body)
        with self.assertRaises(SafexError) as cm:
            h.cancel()
        self.assertEqual(cm.exception.status, 409, cm.exception.body)
        self.assertEqual(client.get(h.run_id).get("source"), "audit")
        self.assertEqual(client.handle(h.run_id).wait(timeout=30).verdict, "ok")

if __name__ == "__main__":
    unittest.main()
