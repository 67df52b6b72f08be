"""Agent sessions (docs/api.md, "Sessions") through clients/python/safex_client.py against a real
`safex serve`: state kept between commands, files in and out, one caller's session invisible to
another, closed sessions refusing commands with the reason, the limits, concurrency, the audit
trail, and recovery after a killed service."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import serve_fixture  # noqa: E402
from safex_client import SafexError  # noqa: E402

SESSION_POLICY = """policy "pytest-session" extends "base-untrusted" {
  @override("tests: agent sessions") session {
    max_execs = 40
    idle_timeout = 60s
    max_lifetime = 10m
  }
  @override("tests: a command's own choices") caller {
    env = ["SEED"]
    cwd = ["/tmp"]
  }
}
"""
SHORT_POLICY = """policy "pytest-session-short" extends "base-untrusted" {
  @override("tests: agent sessions") session {
    max_execs = 2
    idle_timeout = 1s
    max_lifetime = 1h
  }
}
"""
LIFE_POLICY = """policy "pytest-session-life" extends "base-untrusted" {
  @override("tests: agent sessions") session {
    max_execs = 100
    idle_timeout = 1s
    max_lifetime = 2s
  }
}
"""
POLICIES = {"pytest-session": SESSION_POLICY, "pytest-session-short": SHORT_POLICY,
            "pytest-session-life": LIFE_POLICY}
SERVICE = "    max_sessions = 12\n    max_sessions_per_uid = 10\n"


def sh(script):
    return ["/bin/sh", "-c", script]


def session_rows(db):
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        conn.row_factory = sqlite3.Row
        return {r["session_id"]: dict(r) for r in conn.execute("SELECT * FROM sessions")}


class SessionDaemon(unittest.TestCase):
    """A service with the session policies; after its tests, no session is left open in its
    audit log and the log verifies."""

    daemon = None

    @classmethod
    def setUpClass(cls):
        serve_fixture.require_root_or_skip()
        cls.daemon = serve_fixture.ServeFixture(extra_service=SERVICE, extra_policies=POLICIES,
                                                max_concurrent=8)
        try:
            cls.daemon.start()
        except BaseException:
            cls.daemon.cleanup()
            raise
        cls.client = cls.daemon.client(timeout=120)

    @classmethod
    def tearDownClass(cls):
        if cls.daemon is None:
            return
        code = cls.daemon.stop()
        log = cls.daemon.log()
        rows = session_rows(cls.daemon.audit_db)
        verify = subprocess.run([serve_fixture.binary(), "audit", "verify", "--audit-db",
                                 cls.daemon.audit_db, "--key",
                                 os.path.join(cls.daemon.dir, "audit.key")],
                                capture_output=True, text=True)
        cls.daemon.cleanup()
        if code != 0:
            raise AssertionError(f"safex serve exited with {code}:\n{log[-4000:]}")
        open_left = [r for r in rows.values() if r["closed_ns"] is None]
        if open_left:
            raise AssertionError(f"sessions left open in the audit log: {open_left}")
        if verify.returncode != 0:
            raise AssertionError(f"audit verify failed: {verify.stdout}{verify.stderr}")


class SessionTest(SessionDaemon):
    def test_commands_share_files_and_each_has_its_own_result(self):
        with self.client.session("pytest-session") as s:
            put = s.files.write("/tmp/work/in.txt", "given\n")
            self.assertEqual(put["bytes"], 6)
            first = s.exec(sh("cat /tmp/work/in.txt; echo made > /tmp/work/out.txt; exit 3"))
            self.assertEqual(first.verdict, "nonzero-exit", first.raw)
            self.assertEqual(first.exit_status, 3)
            self.assertEqual(first.stdout, "given\n")
            streamed = []
            second = s.exec(sh("cat /tmp/work/out.txt; id -u"), on_stdout=streamed.append)
            self.assertEqual(second.verdict, "ok", second.raw)
            self.assertEqual(second.stdout, "made\n65534\n")
            self.assertEqual("".join(streamed), "made\n65534\n")
            self.assertEqual(s.files.read("/tmp/work/out.txt"), b"made\n")
            self.assertEqual(s.exec(["/bin/cat"], stdin=b"piped").stdout, "piped")
            state = s.state()
            self.assertEqual(state["execs"], 3, state)
            self.assertEqual(state["state"], "open", state)
            # The command is a run of the runs API too, with the session named in its evidence.
            run = self.client.get(second.run_id)
            self.assertEqual(run.get("state"), "finished", run)
        self.assertEqual(s.state()["state"], "closed")

    def test_a_command_takes_the_callers_choices_the_policy_allows(self):
        with self.client.session("pytest-session") as s:
            body = {"argv": sh('echo "$SEED $PWD"; echo "$PATH" >&2; sleep 3'), "env": {"SEED": "7"},
                    "cwd": "/tmp/sub", "wall_time_ms": 1000}
            s.exec(sh("mkdir -p /tmp/sub"))
            r = self.client._json("POST", s._path("/exec"), json.dumps(body).encode())
            self.assertEqual(r["verdict"], "timeout", r)
            self.assertEqual(r["stdout"]["text"], "7 /tmp/sub\n", r)
            # The next command has the session's own environment, directory and wall time (and
            # the chosen command kept the rest of the session's environment).
            plain = s.exec(sh('echo "${SEED:-unset} $PWD"; echo "$PATH" >&2; sleep 1.2'))
            self.assertEqual((plain.verdict, plain.stdout), ("ok", "unset /tmp\n"), plain.raw)
            self.assertEqual(plain.stderr, r["stderr"]["text"])
            with self.assertRaises(SafexError) as e:
                self.client._json("POST", s._path("/exec"), json.dumps(
                    {"argv": ["/bin/true"], "env": {"LD_PRELOAD": "/tmp/x.so"}}).encode())
            self.assertEqual(e.exception.status, 400)

    def test_a_closed_session_refuses_commands_with_the_reason(self):
        s = self.client.session("pytest-session")
        s.exec(["/bin/true"])
        s.close()
        with self.assertRaises(SafexError) as e:
            s.exec(["/bin/true"])
        self.assertEqual(e.exception.status, 410)
        self.assertIn("deleted by uid 0", e.exception.message)
        with self.assertRaises(SafexError) as e:
            s.files.read("/tmp/x")
        self.assertEqual(e.exception.status, 410)

    def test_idle_timeout_and_max_execs_end_a_session(self):
        idle = self.client.session("pytest-session-short")
        time.sleep(3)
        with self.assertRaises(SafexError) as e:
            idle.exec(["/bin/true"])
        self.assertEqual(e.exception.status, 410)
        self.assertIn("idle longer than its idle_timeout", e.exception.message)
        counted = self.client.session("pytest-session-short")
        try:
            for _ in range(2):
                self.assertEqual(counted.exec(["/bin/true"]).verdict, "ok")
            with self.assertRaises(SafexError) as e:
                counted.exec(["/bin/true"])
            self.assertEqual(e.exception.status, 410)
            self.assertIn("max_execs (2)", e.exception.message)
        finally:
            counted.close()

    def test_a_changed_policy_ends_the_session_at_its_next_command(self):
        path = os.path.join(self.daemon.policy_dir, "pytest-session-change.policy")
        with open(path, "w") as f:
            f.write(SESSION_POLICY.replace("pytest-session", "pytest-session-change"))
        s = self.client.session("pytest-session-change")
        self.assertEqual(s.exec(["/bin/true"]).verdict, "ok")
        with open(path, "w") as f:
            f.write(SESSION_POLICY.replace("pytest-session", "pytest-session-change")
                    .replace("max_execs = 40", "max_execs = 39"))
        with self.assertRaises(SafexError) as e:
            s.exec(["/bin/true"])
        self.assertEqual(e.exception.status, 409)
        self.assertIn("its policy changed since it opened", e.exception.message)
        self.assertEqual(s.state()["state"], "closed")

    def test_max_lifetime_ends_a_busy_session(self):
        s = self.client.session("pytest-session-life")
        start = time.monotonic()
        with self.assertRaises(SafexError) as e:
            while time.monotonic() - start < 10:
                s.exec(["/bin/true"])  # never idle for its 1 s idle_timeout
                time.sleep(0.2)
        self.assertEqual(e.exception.status, 410)
        self.assertIn("its max_lifetime (2s) passed", e.exception.message)
        self.assertLess(time.monotonic() - start, 5)

    def test_a_command_that_ends_the_init_ends_the_session_with_the_reason(self):
        s = self.client.session("pytest-session")
        r = s.exec(sh("kill -9 1; sleep 5"))
        self.assertIn("the session's sandbox ended during the command", r.get("reason", ""),
                      r.raw)
        with self.assertRaises(SafexError) as e:
            s.exec(["/bin/true"])
        self.assertEqual(e.exception.status, 410)
        self.assertIn("its sandbox ended", e.exception.message)

    def test_a_policy_without_sessions_refuses_them(self):
        with self.assertRaises(SafexError) as e:
            self.client.session("base-untrusted")
        self.assertEqual(e.exception.status, 400)
        self.assertIn("does not allow sessions", e.exception.message)

    def test_another_callers_session_does_not_exist_for_them(self):
        with self.client.session("pytest-session") as s:
            sid = s.id
            socket_path = self.daemon.socket

            def other():
                from safex_client import Session, SafexClient
                c = SafexClient(socket_path)
                foreign = Session(c, {"session_id": sid})
                try:
                    foreign.state()
                    return "visible"
                except SafexError as e:
                    first = e.status
                try:
                    foreign.exec(["/bin/true"])
                    return "ran"
                except SafexError as e:
                    return (first, e.status)

            self.assertEqual(self.daemon.as_uid(serve_fixture.NOBODY, other), ("ok", (404, 404)))
            self.assertEqual(s.exec(["/bin/true"]).verdict, "ok")

    def test_files_never_follow_a_planted_symlink(self):
        with self.client.session("pytest-session") as s:
            s.exec(sh("ln -s /etc /tmp/etc; ln -s /bin/sh /tmp/sh"))
            for path in ["/tmp/etc/passwd", "/tmp/sh"]:
                with self.subTest(path=path), self.assertRaises(SafexError) as e:
                    s.files.read(path)
                self.assertIn("symlink", e.exception.message)
            for path in ["/etc/passwd", "/tmp/../etc/passwd", "/data/in/x", "relative"]:
                with self.subTest(path=path), self.assertRaises((SafexError, ValueError)):
                    s.files.write(path, "x")

    def test_eight_sessions_of_twenty_commands_at_once(self):
        errors = []

        def work(n):
            try:
                with self.client.session("pytest-session") as s:
                    for i in range(20):
                        r = s.exec(sh(f"echo {n}-{i} >> /tmp/log; wc -l < /tmp/log"))
                        if r.verdict != "ok" or r.stdout.strip() != str(i + 1):
                            errors.append((n, i, r.raw))
                            return
            except Exception as e:  # noqa: BLE001 - collected for the assertion
                errors.append((n, repr(e)))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        self.assertEqual(errors, [])

    def test_the_audit_log_has_the_sessions_files_and_commands(self):
        with self.client.session("pytest-session") as s:
            s.files.write("/tmp/a.txt", "abc")
            s.exec(["/bin/true"])
            s.files.read("/tmp/a.txt")
            sid = s.id
        listed = subprocess.run([serve_fixture.binary(), "audit", "sessions", "--json",
                                 "--limit", "0", "--audit-db", self.daemon.audit_db],
                                capture_output=True, text=True)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        mine = [x for x in json.loads(listed.stdout) if x["session_id"] == sid]
        self.assertEqual([(x["execs"], x["files_in"], x["files_out"], x["uid"]) for x in mine],
                         [(1, 1, 1, 0)], listed.stdout)
        self.assertIn("deleted by uid 0", mine[0]["closed_because"])
        row = session_rows(self.daemon.audit_db)[sid]
        self.assertEqual(row["uid"], 0)
        self.assertEqual(row["policy_name"], "pytest-session")
        self.assertEqual(row["execs"], 1)
        self.assertEqual((row["files_in"], row["files_out"]), (1, 1))
        self.assertIn("deleted by uid 0", row["closed_because"])


class SessionCliTest(SessionDaemon):
    """`safex session` and `safex submit --session` against the same service."""

    def safex(self, *args, stdin=None):
        return subprocess.run([serve_fixture.binary(), *args], input=stdin,
                              capture_output=True, timeout=120)

    def test_the_cli_drives_a_session(self):
        sock = ["--socket", self.daemon.socket]
        opened = self.safex("session", "open", "--policy", "pytest-session", *sock)
        self.assertEqual(opened.returncode, 0, opened.stderr)
        sid = json.loads(opened.stdout)["session_id"]
        src = os.path.join(self.daemon.dir, "given.txt")
        with open(src, "w") as f:
            f.write("from the host\n")
        put = self.safex("session", "put", *sock, sid, "/tmp/w/given.txt", src)
        self.assertEqual(put.returncode, 0, put.stderr)
        ran = self.safex("submit", "--session", sid, *sock, "--",
                         "/bin/sh", "-c", "cat /tmp/w/given.txt; echo out > /tmp/w/o; exit 5")
        self.assertEqual(ran.returncode, 5, ran.stderr)
        self.assertEqual(ran.stdout, b"from the host\n")
        got = self.safex("session", "get", *sock, sid, "/tmp/w/o")
        self.assertEqual((got.returncode, got.stdout), (0, b"out\n"), got.stderr)
        both = self.safex("submit", "--session", sid, "--policy", "x", *sock, "--", "/bin/true")
        self.assertEqual(both.returncode, 2 if b"usage" in both.stderr else 125, both.stderr)
        closed = self.safex("session", "close", *sock, sid)
        self.assertEqual(closed.returncode, 0, closed.stderr)
        late = self.safex("submit", "--session", sid, *sock, "--", "/bin/true")
        self.assertEqual(late.returncode, 125, late.stderr)
        self.assertIn(b"is closed: deleted by uid 0", late.stderr)


class SessionPoolTest(unittest.TestCase):
    """A session of a pooled policy takes a ready sandbox: its init is the pooled launcher, the
    audit log names the pooled sandbox in the session's opening (one sandbox, one session), and
    a killed service's pooled session is closed by recovery without the sandbox being counted
    twice (the log still verifies)."""

    def wait_ready(self, client):
        until = time.monotonic() + 120
        while time.monotonic() < until:
            if 'safex_pool_ready{policy="pytest-session"} 1' in client.metrics():
                return
            time.sleep(0.1)
        self.fail("the pool did not fill")

    def test_a_session_takes_a_pooled_sandbox(self):
        serve_fixture.require_root_or_skip()
        daemon = serve_fixture.ServeFixture(
            extra_policies=POLICIES, extra_service='    pool "pytest-session" { size = 1 }\n')
        try:
            daemon.start()
            client = daemon.client()
            self.wait_ready(client)
            with client.session("pytest-session") as s:
                s.files.write("/tmp/a", "1")
                r = s.exec(sh("cat /tmp/a; id -u; set -- /proc/[0-9]*; echo $#"))
                self.assertEqual(r.stdout, "165534\n2\n", r.raw)
                self.assertEqual(s.exec(sh("cat /tmp/a")).stdout, "1")
            row = session_rows(daemon.audit_db)[s.id]
            self.assertIn('"pooled ', row["enforcement"])
            self.wait_ready(client)
            killed = client.session("pytest-session")
            killed.exec(["/bin/true"])
            daemon.proc.send_signal(signal.SIGKILL)
            daemon.proc.wait(30)
            daemon.proc = None
            daemon.start()
            self.assertEqual(daemon.stop(), 0, daemon.log()[-3000:])
            verify = subprocess.run([serve_fixture.binary(), "audit", "verify", "--audit-db",
                                     daemon.audit_db, "--key",
                                     os.path.join(daemon.dir, "audit.key")],
                                    capture_output=True, text=True)
            self.assertEqual(verify.returncode, 0, verify.stdout + verify.stderr)
            self.assertIn("interrupted", session_rows(daemon.audit_db)[killed.id]["closed_because"])
        finally:
            daemon.cleanup()


class SessionRecoveryTest(unittest.TestCase):
    """A killed service's sessions are closed (recorded interrupted) by the next start, and their
    sandboxes removed."""

    def test_a_killed_services_sessions_are_closed_at_the_next_start(self):
        serve_fixture.require_root_or_skip()
        daemon = serve_fixture.ServeFixture(extra_policies=POLICIES)
        try:
            daemon.start()
            s = daemon.client().session("pytest-session")
            s.exec(sh("echo kept > /tmp/x"))
            daemon.proc.send_signal(signal.SIGKILL)
            daemon.proc.wait(30)
            daemon.proc = None
            daemon.start()
            row = session_rows(daemon.audit_db)[s.id]
            self.assertIn("interrupted", row["closed_because"] or "", row)
            self.assertFalse(os.path.exists(os.path.join(daemon.state_dir, s.id)))
            self.assertEqual(daemon.stop(), 0, daemon.log()[-3000:])
        finally:
            daemon.cleanup()


if __name__ == "__main__":
    unittest.main()
