"""docs/openapi.yaml against a running `safex serve` (tests/python/serve_fixture.py) and against
docs/api.md:

- every path and method of docs/api.md's table is in the YAML, and every one in the YAML is in
  the table;
- every documented operation is called for real, in the situations that give its documented
  answers (success and errors); each answer's status must be one the YAML documents for that
  operation, its content type the documented one, and its body must validate against the
  documented schema (the event stream line by line);
- every operation was exercised.

The validator handles the subset of JSON Schema (OpenAPI 3.0 flavour) the YAML uses: $ref, type,
nullable, required, properties, additionalProperties, items, minItems, enum, oneOf, pattern,
minimum.
"""

import base64
import hashlib
import json
import os
import re
import sys
import time
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "python"))

import serve_fixture  # noqa: E402

try:
    import yaml
except ImportError:  # python3-yaml (scripts/install-deps.sh installs it)
    yaml = None

OPENAPI = os.path.join(SOURCE_DIR, "docs", "openapi.yaml")
API_MD = os.path.join(SOURCE_DIR, "docs", "api.md")
UNKNOWN_RUN = "01900000-0000-7000-8000-000000000000"
# The docs' session example (docs/api.md, "Sessions").
SESSION_POLICY = """policy "agent-session" extends "python-untrusted" {
  @override("agent sessions: state kept between a task's steps") session {
    max_execs = 100
    idle_timeout = 5m
    max_lifetime = 1h
  }
}
"""


def load_spec():
    if yaml is None:
        if os.environ.get("CI"):
            raise AssertionError("python3-yaml is missing (scripts/install-deps.sh installs it)")
        raise unittest.SkipTest("python3-yaml is not installed")
    with open(OPENAPI) as f:
        return yaml.safe_load(f)


# --- a small validator ----------------------------------------------------------------------

class Validator:
    def __init__(self, spec):
        self.spec = spec

    def resolve(self, schema):
        while isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            if not ref.startswith("#/"):
                raise ValueError(f"unsupported $ref {ref}")
            node = self.spec
            for part in ref[2:].split("/"):
                node = node[part]
            schema = node
        return schema

    def errors(self, value, schema, where="$"):
        """The list of ways `value` breaks `schema` (empty: valid)."""
        schema = self.resolve(schema)
        if value is None:
            if schema.get("nullable"):
                return []
            if "type" in schema or "properties" in schema or "oneOf" in schema:
                return [f"{where}: null is not allowed"]
            return []
        out = []
        t = schema.get("type")
        if t is not None and not self._type_ok(value, t):
            return [f"{where}: {type(value).__name__} {_short(value)} is not {t}"]
        if "enum" in schema and value not in schema["enum"]:
            out.append(f"{where}: {_short(value)} is not one of {schema['enum']}")
        if isinstance(value, str) and "pattern" in schema:
            if not re.search(schema["pattern"], value):
                out.append(f"{where}: {_short(value)} does not match /{schema['pattern']}/")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and value < schema["minimum"]:
                out.append(f"{where}: {value} < {schema['minimum']}")
        if isinstance(value, dict):
            for key in schema.get("required", []):
                if key not in value:
                    out.append(f"{where}: missing required {key!r}")
            props = schema.get("properties", {})
            for key, v in value.items():
                if key in props:
                    out += self.errors(v, props[key], f"{where}.{key}")
                else:
                    extra = schema.get("additionalProperties", True)
                    if extra is False:
                        out.append(f"{where}: unexpected property {key!r}")
                    elif isinstance(extra, dict):
                        out += self.errors(v, extra, f"{where}.{key}")
        if isinstance(value, list):
            if len(value) < schema.get("minItems", 0):
                out.append(f"{where}: fewer than {schema['minItems']} items")
            if "items" in schema:
                for i, v in enumerate(value):
                    out += self.errors(v, schema["items"], f"{where}[{i}]")
        if "oneOf" in schema:
            results = [self.errors(value, s, where) for s in schema["oneOf"]]
            matched = sum(1 for r in results if not r)
            if matched != 1:
                detail = "; ".join(" / ".join(r[:2]) for r in results if r)
                out.append(f"{where}: matches {matched} of oneOf (need exactly 1): {detail}")
        return out

    @staticmethod
    def _type_ok(value, t):
        if t == "object":
            return isinstance(value, dict)
        if t == "array":
            return isinstance(value, list)
        if t == "string":
            return isinstance(value, str)
        if t == "boolean":
            return isinstance(value, bool)
        if t == "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        if t == "number":
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        raise ValueError(f"unsupported type {t}")


def _short(v):
    s = json.dumps(v) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


# --- docs/api.md's table --------------------------------------------------------------------

def api_md_operations():
    """{(METHOD, templated path)} from the table under "## Paths" of docs/api.md."""
    ops = set()
    with open(API_MD) as f:
        text = f.read()
    section = text.split("## Paths", 1)[1].split("\n## ", 1)[0]
    for m in re.finditer(r"^\|\s*`([A-Z]+) (/[^`\s]*)`", section, re.M):
        method, path = m.group(1), m.group(2).split("?", 1)[0]
        path = path.replace("/ID", "/{id}").replace("/NAME", "/{name}")
        ops.add((method, path))
    return ops


def openapi_operations(spec):
    methods = {"get", "put", "post", "delete", "patch", "head", "options"}
    return {(m.upper(), p) for p, item in spec["paths"].items() for m in item if m in methods}


class DocsAgreeTest(unittest.TestCase):
    def test_api_md_table_and_openapi_name_the_same_operations(self):
        spec = load_spec()
        md, oa = api_md_operations(), openapi_operations(spec)
        self.assertGreaterEqual(len(md), 9, md)
        self.assertEqual(sorted(md - oa), [], "in docs/api.md but not in docs/openapi.yaml")
        self.assertEqual(sorted(oa - md), [], "in docs/openapi.yaml but not in docs/api.md")

    def test_every_ref_resolves(self):
        spec = load_spec()
        v = Validator(spec)

        def walk(node):
            if isinstance(node, dict):
                if "$ref" in node:
                    v.resolve(node)
                for x in node.values():
                    walk(x)
            elif isinstance(node, list):
                for x in node:
                    walk(x)

        walk(spec)

    def test_the_validator_validates(self):
        v = Validator(load_spec())
        ok = {"error": {"status": 404, "message": "no such run"}}
        self.assertEqual(v.errors(ok, {"$ref": "#/components/schemas/Error"}), [])
        self.assertTrue(v.errors({"error": {"status": "404"}}, {"$ref": "#/components/schemas/Error"}))
        ev = {"$ref": "#/components/schemas/Event"}
        self.assertEqual(v.errors({"seq": 0, "type": "state", "state": "queued"}, ev), [])
        self.assertEqual(v.errors({"seq": 3, "type": "stdout", "data": "x\n"}, ev), [])
        self.assertTrue(v.errors({"seq": 3, "type": "stdout"}, ev))
        self.assertTrue(v.errors({"seq": 3, "type": "stdout", "data": "a", "data_base64": "YQ=="},
                                 ev))
        self.assertTrue(v.errors({"seq": -1, "type": "state", "state": "queued"}, ev))
        self.assertTrue(v.errors({"seq": True, "type": "state", "state": "queued"}, ev))
        self.assertTrue(v.errors({"seq": 1, "type": "bogus"}, ev))


# --- against the daemon ---------------------------------------------------------------------

class _Answer:
    """The status and headers of an answer read elsewhere (in a child process)."""

    def __init__(self, status, headers):
        self.status = status
        self._headers = {k.lower(): v for k, v in headers.items()}

    def getheader(self, name, default=None):
        return self._headers.get(name.lower(), default)


class ContractTest(unittest.TestCase):
    daemon = None

    @classmethod
    def setUpClass(cls):
        cls.spec = load_spec()
        serve_fixture.require_root_or_skip()
        cls.v = Validator(cls.spec)
        # One run at a time, so that a second run waits in the queue (the queued state).
        cls.daemon = serve_fixture.ServeFixture(max_concurrent=1,
                                                extra_policies={"agent-session": SESSION_POLICY})
        try:
            cls.daemon.start()
        except BaseException:
            cls.daemon.cleanup()
            raise
        cls.client = cls.daemon.client()
        cls.exercised = set()

    @classmethod
    def tearDownClass(cls):
        if cls.daemon is not None:
            cls.daemon.cleanup()

    # One raw exchange, checked against the operation's documented responses.
    def call(self, method, template, path, body=None, headers=None, raw_body=None):
        if body is not None:
            raw_body = json.dumps(body).encode()
        conn, resp = self.client._open(method, path, raw_body, headers, timeout=120)
        try:
            data = resp.read()
        finally:
            conn.close()
        self.check(method, template, path, resp, data)
        return resp, data

    def check(self, method, template, path, resp, data):
        item = self.spec["paths"][template]
        if method.lower() not in item:
            # A method the path does not take: 405 with Allow naming the documented ones.
            self.assertEqual(resp.status, 405, f"{method} {path}: {data[:300]!r}")
            allow = {m.strip() for m in (resp.getheader("Allow") or "").split(",")}
            documented = {m.upper() for m in item if m != "parameters"}
            self.assertEqual(allow, documented, f"{method} {path}: Allow header")
            self.assertEqual(self.v.errors(json.loads(data), {"$ref": "#/components/schemas/Error"}),
                             [], f"{method} {path}")
            return
        op = item[method.lower()]
        documented = op["responses"]
        where = f"{method} {path} -> {resp.status}"
        self.assertIn(str(resp.status), documented,
                      f"{where}: status not documented for {method} {template} "
                      f"(documented: {sorted(documented)}); body: {data[:300]!r}")
        self.exercised.add((method, template))
        response = self.v.resolve(documented[str(resp.status)])
        content = response.get("content", {})
        ctype = (resp.getheader("Content-Type") or "").split(";")[0].strip()
        if not content:
            return
        self.assertIn(ctype, content, f"{where}: Content-Type {ctype!r} is not documented "
                                      f"({sorted(content)})")
        schema = content[ctype].get("schema", {})
        for name, header in response.get("headers", {}).items():
            header = self.v.resolve(header)
            if header.get("required"):
                self.assertIsNotNone(resp.getheader(name), f"{where}: no {name} header")
        if ctype == "application/json":
            try:
                parsed = json.loads(data)
            except ValueError as e:
                self.fail(f"{where}: body is not JSON ({e}): {data[:300]!r}")
            errs = self.v.errors(parsed, schema)
            self.assertEqual(errs, [], f"{where}: body does not match the schema")
            if resp.status >= 400:
                self.assertEqual(parsed["error"]["status"], resp.status, where)
        elif ctype == "application/x-ndjson":
            lines = [ln for ln in data.split(b"\n") if ln.strip()]
            self.assertTrue(lines, f"{where}: empty event stream")
            for i, ln in enumerate(lines):
                errs = self.v.errors(json.loads(ln), schema, f"line {i}")
                self.assertEqual(errs, [], f"{where}: event does not match the schema")
        elif ctype == "application/octet-stream":
            self.assertEqual(resp.getheader("Safex-Sha256"), hashlib.sha256(data).hexdigest(),
                             where)
        elif ctype == "text/plain":
            data.decode("utf-8")

    def submit(self, argv, policy="python-untrusted", wait=False, headers=None, **extra):
        body = {"policy": policy, "argv": argv, "wait": wait}
        body.update(extra)
        return self.call("POST", "/v1/runs", "/v1/runs", body, headers)

    def finished_run(self):
        """A run (wait false) that wrote /data/out/result.json, once it has ended."""
        if getattr(type(self), "_finished", None) is None:
            resp, data = self.submit(
                ["python3", "-c", "open('/data/out/result.json', 'w').write('[1, 2]')"],
                stdin=base64.b64encode(b"in").decode(),
                files=[{"name": "x.txt", "data": base64.b64encode(b"x").decode()}])
            self.assertEqual(resp.status, 202, data)
            self.assertTrue((resp.getheader("Location") or "").startswith("/v1/runs/"))
            run_id = json.loads(data)["run_id"]
            self.assertEqual(self.client.handle(run_id).wait(timeout=120).verdict, "ok")
            type(self)._finished = run_id
        return type(self)._finished

    def test_health_and_metrics(self):
        self.call("GET", "/v1/health", "/v1/health")
        self.call("GET", "/metrics", "/metrics")
        self.call("POST", "/v1/health", "/v1/health", raw_body=b"")  # 405
        self.call("DELETE", "/metrics", "/metrics")  # 405

    def test_submit(self):
        resp, data = self.submit(["python3", "-c", "print(1)"], wait=True)
        self.assertEqual(resp.status, 200, data)
        self.finished_run()  # 202
        self.submit(["true"], policy="no-such-policy", wait=True)  # 404
        self.submit(["true"], policy="Bad/Name")  # 400
        self.call("POST", "/v1/runs", "/v1/runs", {"policy": "base-untrusted", "argv": ["true"],
                                                   "unknown": 1})  # 400
        self.call("POST", "/v1/runs", "/v1/runs", raw_body=b"{not json")  # 400
        self.submit(["x"] * 1000, policy="base-untrusted")  # 413: over max_argv
        self.call("PUT", "/v1/runs", "/v1/runs", raw_body=b"{}")  # 405

        # Another uid without an allow rule for the policy: 403.
        sock = self.daemon.socket

        def as_nobody():
            from safex_client import SafexClient
            conn, r = SafexClient(sock)._open("POST", "/v1/runs", json.dumps(
                {"policy": "python-untrusted", "argv": ["true"], "wait": False}).encode())
            try:
                return r.status, dict(r.getheaders()), r.read()
            finally:
                conn.close()

        kind, *rest = self.daemon.as_uid(serve_fixture.NOBODY, as_nobody)
        self.assertEqual(kind, "ok", rest)
        status, hdrs, body = rest[0]
        self.assertEqual(status, 403, body)
        self.check("POST", "/v1/runs", "/v1/runs (uid 65534)", _Answer(status, hdrs), body)

    def test_submit_wall_time_ms(self):
        resp, data = self.submit(["python3", "-c", "pass"], wall_time_ms=1000)
        self.assertEqual(resp.status, 202, data)
        # More than the plan allows: 400 to a waiting client; with wait false a refused result
        # carrying the 400 (a refusal decided after admission).
        resp, data = self.submit(["python3", "-c", "pass"], wall_time_ms=3600_000, wait=True)
        self.assertEqual(resp.status, 400, data)
        self.assertIn("wall_time_ms", json.loads(data)["error"]["message"])
        resp, data = self.submit(["python3", "-c", "pass"], wall_time_ms=3600_000)
        self.assertEqual(resp.status, 202, data)
        result = self.client.handle(json.loads(data)["run_id"]).wait(timeout=60)
        self.assertEqual((result.verdict, result.error["status"]), ("refused", 400), result.raw)
        resp, data = self.submit(["python3", "-c", "pass"], wall_time_ms=0)  # 1 .. the plan's
        self.assertEqual(resp.status, 400, data)

    def test_submit_idempotency_key(self):
        key = {"Idempotency-Key": f"contract-{time.time_ns()}"}
        resp, data = self.submit(["python3", "-c", "print(2)"], headers=key)
        self.assertEqual(resp.status, 202, data)
        resp2, data2 = self.submit(["python3", "-c", "print(2)"], headers=key)
        self.assertEqual(json.loads(data)["run_id"], json.loads(data2)["run_id"])
        resp3, _ = self.submit(["python3", "-c", "print(3)"], headers=key)
        self.assertEqual(resp3.status, 409)

    def test_run_events_state_files(self):
        run_id = self.finished_run()
        resp, data = self.call("GET", "/v1/runs/{id}/events", f"/v1/runs/{run_id}/events")
        self.assertEqual(resp.status, 200)
        events = [json.loads(ln) for ln in data.split(b"\n") if ln.strip()]
        self.assertEqual(events[-1]["type"], "result")
        self.assertEqual(events[-1]["result"]["verdict"], "ok", events[-1])
        self.call("GET", "/v1/runs/{id}/events", f"/v1/runs/{run_id}/events?from=1")
        self.call("GET", "/v1/runs/{id}/events", f"/v1/runs/{run_id}/events?from=x")  # 400
        self.call("GET", "/v1/runs/{id}/events", f"/v1/runs/{UNKNOWN_RUN}/events")  # 404
        resp, data = self.call("GET", "/v1/runs/{id}", f"/v1/runs/{run_id}")
        self.assertEqual(json.loads(data)["state"], "finished")
        self.call("GET", "/v1/runs/{id}", f"/v1/runs/{UNKNOWN_RUN}")  # 404
        self.call("GET", "/v1/runs/{id}", "/v1/runs/not-a-run-id")  # 404
        resp, data = self.call("GET", "/v1/runs/{id}/files", f"/v1/runs/{run_id}/files")
        self.assertEqual([f["name"] for f in json.loads(data)["files"]], ["result.json"])
        self.call("GET", "/v1/runs/{id}/files", f"/v1/runs/{UNKNOWN_RUN}/files")  # 404
        tmpl = "/v1/runs/{id}/files/{name}"
        resp, data = self.call("GET", tmpl, f"/v1/runs/{run_id}/files/result.json")
        self.assertEqual((resp.status, data), (200, b"[1, 2]"))
        for bad in ["..", "%2e%2e", "%00", "/etc/passwd", "nope.json", "result.json%00",
                    "./result.json"]:
            resp, _ = self.call("GET", tmpl, f"/v1/runs/{run_id}/files/{bad}")
            self.assertIn(resp.status, (400, 404), bad)
        self.call("GET", tmpl, f"/v1/runs/{UNKNOWN_RUN}/files/result.json")  # 404

    def test_list(self):
        run_id = self.finished_run()
        resp, data = self.call("GET", "/v1/runs", "/v1/runs?limit=50")
        self.assertIn(run_id, [r["run_id"] for r in json.loads(data)["runs"]])
        self.call("GET", "/v1/runs", "/v1/runs")
        self.call("GET", "/v1/runs", "/v1/runs?limit=abc")  # 400

    def test_cancel(self):
        # A running run (its program has started: it printed), a queued one behind it
        # (max_concurrent 1), both 202; then 409 for a finished one, 404 for an unknown one.
        resp, data = self.submit(["/bin/sh", "-c", "echo started; exec sleep 30"],
                                 policy="base-untrusted")
        sleeper = json.loads(data)["run_id"]
        for ev in self.client.handle(sleeper).events(timeout=60):
            if ev["type"] == "stdout":
                break
        resp, data = self.submit(["/bin/true"], policy="base-untrusted")
        queued = json.loads(data)["run_id"]
        resp, data = self.call("GET", "/v1/runs/{id}", f"/v1/runs/{queued}")
        state = json.loads(data)
        self.assertEqual((state["state"], state.get("queue_position")), ("queued", 1), state)
        resp, data = self.call("GET", "/v1/runs", "/v1/runs?limit=5")
        self.assertIn(queued, [r["run_id"] for r in json.loads(data)["runs"]])
        resp, data = self.call("DELETE", "/v1/runs/{id}", f"/v1/runs/{queued}")
        self.assertEqual(resp.status, 202, data)
        result = self.client.handle(queued).wait(timeout=60)
        self.assertEqual(result.verdict, "refused", result.raw)
        self.assertIn("before it started", result.reason)
        self.call("GET", "/v1/runs/{id}/events", f"/v1/runs/{queued}/events")

        resp, data = self.call("DELETE", "/v1/runs/{id}", f"/v1/runs/{sleeper}")
        self.assertEqual(resp.status, 202, data)
        result = self.client.handle(sleeper).wait(timeout=60)
        self.assertEqual((result.verdict, result.exit_status), ("interrupted", 130), result.raw)
        self.call("GET", "/v1/runs/{id}", f"/v1/runs/{sleeper}")
        resp, _ = self.call("DELETE", "/v1/runs/{id}", f"/v1/runs/{sleeper}")
        self.assertEqual(resp.status, 409)
        self.call("DELETE", "/v1/runs/{id}", f"/v1/runs/{UNKNOWN_RUN}")  # 404
        self.call("GET", "/v1/runs/{id}/events", f"/v1/runs/{sleeper}/events")

    def test_result_streams_carry_the_delivered_text(self):
        # docs/api.md, "The result object": stdout/stderr each with `text`, and
        # `delivered_base64` only when the bytes are not UTF-8.
        resp, data = self.submit(["/bin/sh", "-c", r"printf 'hi\n'; printf 'a\377\n' >&2"],
                                 policy="base-untrusted", wait=True)
        self.assertEqual(resp.status, 200, data)
        result = json.loads(data)
        self.assertEqual(result["stdout"].get("text"), "hi\n", sorted(result["stdout"]))
        self.assertNotIn("delivered_base64", result["stdout"])
        self.assertEqual(base64.b64decode(result["stderr"]["delivered_base64"]), b"a\377\n")

    def test_files_of_a_run_still_running(self):
        resp, data = self.submit(["/bin/sh", "-c", "echo started; exec sleep 30"],
                                 policy="base-untrusted")
        run_id = json.loads(data)["run_id"]
        h = self.client.handle(run_id)
        try:
            for ev in h.events(timeout=60):
                if ev["type"] == "stdout":
                    break
            self.call("GET", "/v1/runs/{id}/files", f"/v1/runs/{run_id}/files")
            self.call("GET", "/v1/runs/{id}/files/{name}", f"/v1/runs/{run_id}/files/x.txt")
        finally:
            h.cancel()
            h.wait(timeout=60)

    def test_sessions(self):
        r, d = self.call("POST", "/v1/sessions", "/v1/sessions", {"policy": "agent-session"})
        self.assertEqual(r.status, 201, d)
        base = "/v1/sessions/" + json.loads(d)["session_id"]
        r, _ = self.call("POST", "/v1/sessions", "/v1/sessions", {"policy": "base-untrusted"})
        self.assertEqual(r.status, 400)
        r, _ = self.call("GET", "/v1/sessions/{id}", base)
        self.assertEqual(r.status, 200)
        r, _ = self.call("GET", "/v1/sessions/{id}", f"/v1/sessions/{UNKNOWN_RUN}")
        self.assertEqual(r.status, 404)
        files = "/v1/sessions/{id}/files/{name}"
        r, _ = self.call("PUT", files, base + "/files/tmp/w/a.txt", raw_body=b"abc",
                         headers={"Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 200)
        r, d = self.call("GET", files, base + "/files/tmp/w/a.txt")
        self.assertEqual((r.status, d), (200, b"abc"))
        r, _ = self.call("GET", files, base + "/files/etc/passwd")
        self.assertEqual(r.status, 400)
        exe = "/v1/sessions/{id}/exec"
        r, d = self.call("POST", exe, base + "/exec", {"argv": ["/bin/cat", "/tmp/w/a.txt"]})
        self.assertEqual((r.status, json.loads(d)["stdout"]["text"]), (200, "abc"), d)
        r, _ = self.call("POST", exe, base + "/exec", {"argv": ["/bin/true"], "wait": False})
        self.assertEqual(r.status, 202)
        self.client.handle(json.loads(_)["run_id"]).wait(60)
        r, _ = self.call("POST", exe, base + "/exec", {"argv": ["/bin/true"], "env": {"A": "1"}})
        self.assertEqual(r.status, 400)  # a name the policy does not let callers set
        r, _ = self.call("DELETE", "/v1/sessions/{id}", base)
        self.assertEqual(r.status, 200)
        r, _ = self.call("POST", exe, base + "/exec", {"argv": ["/bin/true"]})
        self.assertEqual(r.status, 410)

    def test_zz_every_operation_was_called(self):
        # Runs last (unittest sorts by name); meaningful only when the others ran.
        missing = openapi_operations(self.spec) - self.exercised
        self.assertEqual(sorted(missing), [], "documented operations never called")

if __name__ == "__main__":
    unittest.main()
