"""clients/python/safex_client.py against a scripted fake service on a Unix socket: what the real
daemon does not do on demand (an event stream that breaks off mid-run, a file whose bytes do not
match their digest). No root needed."""

import base64
import hashlib
import http.server
import json
import os
import socketserver
import sys
import tempfile
import threading
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "clients", "python"))

from safex_client import SafexClient, SafexError, SafexProtocolError  # noqa: E402

RUN = "01900000-0000-7000-8000-000000000001"
RESULT = {"run_id": RUN, "verdict": "ok", "exit_status": 0, "reason": "",
          "stdout": {"text": "a\nb\n"}, "stderr": {"delivered_base64":
                                                        base64.b64encode(b"\xff").decode()}}
EVENTS = [{"seq": 0, "type": "state", "state": "queued"},
          {"seq": 1, "type": "state", "state": "running"},
          {"seq": 2, "type": "stdout", "data": "a\n"},
          {"seq": 3, "type": "stdout", "data_base64": base64.b64encode(b"b\n").decode()},
          {"seq": 4, "type": "result", "result": RESULT}]
FILES = {"ok.txt": b"fine", "bad.txt": b"tampered"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def address_string(self):
        return "unix"

    def answer(self, status, body, ctype="application/json", headers=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.posts.append((dict(self.headers), body))
        if body["policy"] == "nope":
            return self.answer(404, {"error": {"status": 404, "message": "no such policy"}})
        self.answer(202, {"run_id": RUN, "state": "queued", "links": {}},
                    headers=[("Location", "/v1/runs/" + RUN)])

    def do_DELETE(self):
        self.answer(409, {"error": {"status": 409, "message": "the run has already finished"}})

    def do_GET(self):
        path, _, query = self.path.partition("?")
        base = "/v1/runs/" + RUN
        if path == base + "/events":
            return self.events(int(query.split("=", 1)[1]) if query else 0)
        if path == base:
            return self.answer(200, {"run_id": RUN, "state": "finished", "result": RESULT})
        if path == base + "/files":
            return self.answer(200, {"files": [
                {"name": n, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()}
                for n, d in FILES.items()], "expires_at": "2026-12-02T10:00:00Z"})
        if path.startswith(base + "/files/"):
            name = path[len(base + "/files/"):]
            self.server.fetched.append(name)
            if name in FILES:
                # bad.txt: the header names other bytes than the ones sent.
                digest = hashlib.sha256(b"fine" if name == "ok.txt" else b"other").hexdigest()
                return self.answer(200, FILES[name], "application/octet-stream",
                                   [("Safex-Sha256", digest)])
        self.answer(404, {"error": {"status": 404, "message": "no such thing"}})

    def events(self, start):
        self.server.event_requests.append(start)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        # The first connection breaks off after two events, without the last chunk.
        stop = 2 if len(self.server.event_requests) == 1 else len(EVENTS)
        for ev in EVENTS[start:stop]:
            line = json.dumps(ev).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()
        if stop == len(EVENTS):
            self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class OfflineTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pyclient-")
        self.sock = os.path.join(self.dir, "s.sock")
        self.server = Server(self.sock, Handler)
        self.server.posts, self.server.event_requests, self.server.fetched = [], [], []
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.client = SafexClient(self.sock, timeout=10)

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_request_body_and_headers(self):
        h = self.client.run("p", ["python3", "main.py"], stdin="hi", files={"main.py": b"x"},
                            wall_time_ms=500, idempotency_key="k-1")
        self.assertEqual(h.run_id, RUN)
        headers, body = self.server.posts[0]
        self.assertEqual(body, {"policy": "p", "argv": ["python3", "main.py"], "wait": False,
                                "stdin": "aGk=", "files": [{"name": "main.py", "data": "eA=="}],
                                "wall_time_ms": 500})
        self.assertEqual(headers["Idempotency-Key"], "k-1")

    def test_a_broken_stream_is_resumed_without_gaps_or_repeats(self):
        out = []
        h = self.client.run("p", ["x"], on_stdout=out.append)
        self.assertEqual(out, ["a\n", b"b\n"])
        self.assertEqual(self.server.event_requests, [0, 2])
        self.assertEqual(h.result.verdict, "ok")
        self.assertEqual(h.result.stdout, "a\nb\n")
        self.assertEqual(h.result.stderr, b"\xff")

    def test_errors_carry_status_message_body(self):
        with self.assertRaises(SafexError) as cm:
            self.client.run("nope", ["x"])
        e = cm.exception
        self.assertEqual((e.status, e.message), (404, "no such policy"))
        self.assertEqual(e.body["error"]["status"], 404)
        with self.assertRaises(SafexError) as cm:
            self.client.handle(RUN).cancel()
        self.assertEqual(cm.exception.status, 409)

    def test_digests_are_checked_and_names_encoded(self):
        h = self.client.handle(RUN)
        self.assertEqual(h.fetch("ok.txt"), b"fine")
        with self.assertRaises(SafexProtocolError):
            h.fetch("bad.txt")
        with self.assertRaises(SafexError):
            h.fetch("a b/%.txt")
        self.assertEqual(self.server.fetched[-1], "a%20b/%25.txt")
        with tempfile.TemporaryDirectory(prefix="pyclient-") as dest:
            with self.assertRaises(SafexProtocolError):
                h.download(dest)
            self.assertEqual(os.listdir(dest), [], "a failed download leaves nothing")
            self.assertEqual(h.download(dest, names=["ok.txt"]), ["ok.txt"])

    def test_no_service(self):
        with self.assertRaises(SafexError) as cm:
            SafexClient(os.path.join(self.dir, "none.sock")).health()
        self.assertEqual(cm.exception.status, 0)
        self.assertIn("not running", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
