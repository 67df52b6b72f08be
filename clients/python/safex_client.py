"""A client for the runs API of `safex serve` (docs/api.md), standard library only.

    from safex_client import SafexClient

    client = SafexClient()                       # /run/safex/safex.sock
    handle = client.run("python-untrusted", ["python3", "-c", "print(6 * 7)"])
    result = handle.wait()
    print(result.verdict, result.exit_status, result.stdout)

Every request is one HTTP/1.1 exchange on a fresh connection to the Unix socket (the service
closes each connection after its answer). The service knows the caller from the socket
(SO_PEERCRED): there is nothing to authenticate here.

Errors: a 4xx/5xx answer raises SafexError(status, message, body); a socket that cannot be
reached, or an answer that breaks the contract, raises SafexConnectionError / SafexProtocolError
(both SafexError, status 0).
"""

import base64
import errno
import hashlib
import http.client
import json
import os
import socket
import time
import urllib.parse

__all__ = [
    "SafexClient",
    "RunHandle",
    "RunResult",
    "SafexError",
    "SafexConnectionError",
    "SafexProtocolError",
    "DEFAULT_SOCKET",
]

DEFAULT_SOCKET = "/run/safex/safex.sock"

# How often events() reconnects after the stream broke off without any new event in between.
_MAX_RECONNECTS_WITHOUT_PROGRESS = 5


class SafexError(Exception):
    """An error answer of the service: `status` (HTTP status, 0 when there was no answer),
    `message` (the service's error.message) and `body` (the decoded JSON body, or the raw text)."""

    def __init__(self, status, message, body=None):
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message
        self.body = body


class SafexConnectionError(SafexError):
    """The socket could not be reached, or the connection broke before a complete answer."""

    def __init__(self, message, body=None):
        super().__init__(0, message, body)


class SafexProtocolError(SafexError):
    """An answer that does not follow docs/api.md (bad JSON, a digest that does not match...)."""

    def __init__(self, message, body=None):
        super().__init__(0, message, body)


class _UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over an AF_UNIX stream socket. `unix_sock` stays reachable after http.client
    drops its own reference (it does so on `Connection: close` answers), so that a reader can
    still change the timeout of a streaming response."""

    def __init__(self, path, timeout=None):
        super().__init__("localhost", timeout=timeout)
        self._path = path
        self.unix_sock = None

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s
        self.unix_sock = s


def _b64(data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return base64.b64encode(bytes(data)).decode("ascii")


def _stream_value(stream):
    """The delivered bytes of a result's stdout/stderr object: bytes when they travelled as
    base64 (not UTF-8), else str."""
    if not isinstance(stream, dict):
        return ""
    if isinstance(stream.get("delivered_base64"), str):
        return base64.b64decode(stream["delivered_base64"], validate=True)
    text = stream.get("text")
    return text if isinstance(text, str) else ""


def _event_data(event):
    """The payload of a stdout/stderr event: str (`data`) or bytes (`data_base64`)."""
    if isinstance(event.get("data_base64"), str):
        return base64.b64decode(event["data_base64"], validate=True)
    return event.get("data", "")


def check_file_name(name):
    """Raises ValueError unless `name` is a relative path a download may create: not empty, no
    NUL, not absolute, no empty, `.` or `..` components."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"unsafe file name {name!r}: empty or not a string")
    if "\0" in name:
        raise ValueError(f"unsafe file name {name!r}: NUL byte")
    if name.startswith("/"):
        raise ValueError(f"unsafe file name {name!r}: absolute")
    for part in name.split("/"):
        if part in ("", ".", ".."):
            raise ValueError(f"unsafe file name {name!r}: empty, '.' or '..' component")
    return name


class RunResult:
    """The result object of a run (what `safex run --json` prints), with shortcuts.

    Attributes: run_id, verdict, exit_status, exit_code, reason, stdout, stderr (str, or bytes
    when the delivered output is not UTF-8), error (the refusal's {"status", "message"} or
    None) and raw (the whole dict). Indexing reads raw: result["plan_digest"]."""

    def __init__(self, raw):
        self.raw = raw if isinstance(raw, dict) else {}
        r = self.raw
        self.run_id = r.get("run_id")
        self.verdict = r.get("verdict")
        self.exit_status = r.get("exit_status")
        self.exit_code = r.get("exit_code")
        self.reason = r.get("reason", "")
        self.error = r.get("error")
        self.stdout = _stream_value(r.get("stdout"))
        self.stderr = _stream_value(r.get("stderr"))

    @property
    def ok(self):
        """True for verdict `ok` (the program ran to its end and exited 0)."""
        return self.verdict == "ok"

    def __getitem__(self, key):
        return self.raw[key]

    def get(self, key, default=None):
        return self.raw.get(key, default)

    def __contains__(self, key):
        return key in self.raw

    def __repr__(self):
        return (f"RunResult(run_id={self.run_id!r}, verdict={self.verdict!r}, "
                f"exit_status={self.exit_status!r})")


class RunHandle:
    """A run admitted by the service. Follow it with events(), wait() for its result, stop it
    with cancel(); once it has ended, its output files are `files`, fetch(name), download(dir)."""

    def __init__(self, client, run_id, accepted=None, result=None):
        self.client = client
        self.run_id = run_id
        self.accepted = accepted or {}  # the 202 body ({"run_id", "state", "links"})
        self._result = RunResult(result) if result is not None else None

    def __repr__(self):
        return f"RunHandle({self.run_id!r})"

    def _path(self, suffix=""):
        return "/v1/runs/" + urllib.parse.quote(self.run_id, safe="") + suffix

    def state(self):
        """GET /v1/runs/ID: the run's state object (state, times, result once finished)."""
        return self.client.get(self.run_id)

    def cancel(self):
        """DELETE /v1/runs/ID: cancels a queued or running run. Returns the 202 body; a run
        that has already finished raises SafexError(409)."""
        return self.client._json("DELETE", self._path(), expect=(202,))

    def events(self, from_seq=0, timeout=None):
        """Yields the run's events (dicts with `seq` and `type`) from `from_seq` on, until the
        `result` event. A dropped connection is resumed with ?from= (no gaps, no repeats).
        `timeout` (seconds) bounds the whole iteration: TimeoutError when it passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        next_seq = from_seq
        failures = 0
        while True:
            progressed = False
            conn, resp = self.client._open(
                "GET", self._path(f"/events?from={int(next_seq)}"), timeout=_remaining(deadline))
            try:
                if resp.status != 200:
                    self.client._raise_for(resp, resp.read())
                while True:
                    if conn.unix_sock is not None:
                        conn.unix_sock.settimeout(_remaining(deadline))
                    line = resp.readline()
                    if not line:
                        break  # the stream ended (or broke) before the result event
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        event = json.loads(line)
                    except ValueError as e:
                        raise SafexProtocolError(f"an event is not JSON: {e}", line) from None
                    seq = event.get("seq")
                    if not isinstance(seq, int):
                        raise SafexProtocolError("an event without an integer seq", event)
                    if seq < next_seq:
                        continue  # already seen (a resumed stream never repeats, but be sure)
                    next_seq = seq + 1
                    progressed = True
                    yield event
                    if event.get("type") == "result":
                        if isinstance(event.get("result"), dict):
                            self._result = RunResult(event["result"])
                        return
            except socket.timeout:
                raise TimeoutError(f"run {self.run_id}: no result within {timeout} s") from None
            except (http.client.IncompleteRead, http.client.HTTPException, ConnectionError):
                pass  # resume below
            finally:
                resp.close()
                conn.close()
            if not progressed and self._has_ended():
                return  # nothing more will come (e.g. `from_seq` past a finished run's end)
            failures = 0 if progressed else failures + 1
            if failures > _MAX_RECONNECTS_WITHOUT_PROGRESS:
                raise SafexConnectionError(
                    f"run {self.run_id}: the event stream kept ending before the result "
                    f"(at seq {next_seq})")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"run {self.run_id}: no result within {timeout} s")
            time.sleep(min(0.1 * (2 ** failures), 2.0))

    def _has_ended(self):
        try:
            st = self.state()
        except SafexError:
            return False
        return st.get("state") == "finished" or st.get("source") == "audit"

    def wait(self, timeout=None):
        """Blocks until the run has ended and returns its RunResult. `timeout` in seconds
        (None: no limit) raises TimeoutError; the run goes on either way. A run refused after
        admission (e.g. an unknown policy) is a RunResult too: verdict `refused`, `.error`."""
        if self._result is not None:
            return self._result
        try:
            for _ in self.events(0, timeout=timeout):
                pass
        except SafexError as e:
            # No stream any more (e.g. the service no longer holds the run): ask for the run.
            if e.status not in (404, 410):
                raise
        if self._result is None:
            st = self.state()
            if isinstance(st.get("result"), dict):
                self._result = RunResult(st["result"])
            elif st.get("state") == "finished" or st.get("source") == "audit":
                # Answered from the audit log: a summary, not the result object.
                raw = dict(st)
                raw.setdefault("exit_status", st.get("exit_code"))
                self._result = RunResult(raw)
            else:
                raise SafexProtocolError(f"run {self.run_id}: the event stream ended without "
                                         "a result and the run has not finished", st)
        return self._result

    @property
    def result(self):
        """The RunResult once known (after wait() or the result event), else None."""
        return self._result

    def list_files(self):
        """GET /v1/runs/ID/files: {"files": [{"name", "size", "sha256"}], "expires_at"}."""
        return self.client._json("GET", self._path("/files"))

    @property
    def files(self):
        """The output files the run delivered: a list of {"name", "size", "sha256"}."""
        return list(self.list_files().get("files", []))

    def _file_path(self, name):
        return self._path("/files/" + urllib.parse.quote(name, safe="/"))

    def fetch(self, name):
        """The bytes of output file `name`, checked against the Safex-Sha256 header."""
        conn, resp = self.client._open("GET", self._file_path(name))
        try:
            body = resp.read()
            if resp.status != 200:
                self.client._raise_for(resp, body)
        except (http.client.HTTPException, ConnectionError) as e:
            raise SafexConnectionError(f"reading file {name!r} of run {self.run_id}: {e}")
        finally:
            resp.close()
            conn.close()
        _check_digest(resp, hashlib.sha256(body).hexdigest(), name)
        return body

    def download(self, dest_dir, names=None):
        """Writes the run's output files (or `names` of them) under the existing directory
        `dest_dir`, as `safex run --output DIR` would: names are checked first (no `..`, `.`,
        empty components, absolute paths, NUL); directories are made 0700 and files created
        0600 with O_EXCL|O_NOFOLLOW relative to their parent's descriptor, so an existing name
        is never overwritten and no symlink under `dest_dir` is followed. Each file's bytes are
        checked against its SHA-256. All or nothing: on any failure what this call created is
        removed and the error raised. Returns the relative names written."""
        entries = self.files
        if names is not None:
            wanted = set(names)
            entries = [e for e in entries if e.get("name") in wanted]
            missing = wanted - {e.get("name") for e in entries}
            if missing:
                raise SafexError(404, f"run {self.run_id} has no files {sorted(missing)}")
        for e in entries:
            check_file_name(e.get("name"))
        root = os.open(dest_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        created = []  # (parent fd, name, is_dir), in creation order
        fds = [root]
        try:
            for e in entries:
                self._download_one(root, e, created, fds)
        except BaseException:
            for parent, leaf, is_dir in reversed(created):
                try:
                    os.rmdir(leaf, dir_fd=parent) if is_dir else os.unlink(leaf, dir_fd=parent)
                except OSError:
                    pass
            raise
        finally:
            for fd in fds:
                os.close(fd)
        return [e["name"] for e in entries]

    def _download_one(self, root, entry, created, fds):
        name = entry["name"]
        parts = name.split("/")
        parent = root
        for part in parts[:-1]:
            try:
                os.mkdir(part, 0o700, dir_fd=parent)
                created.append((parent, part, True))
            except FileExistsError:
                pass
            # O_NOFOLLOW: a symlink here fails (ELOOP), whatever it points to.
            fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=parent)
            fds.append(fd)
            parent = fd
        leaf = parts[-1]
        out = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      0o600, dir_fd=parent)
        created.append((parent, leaf, False))
        try:
            conn, resp = self.client._open("GET", self._file_path(name))
            try:
                if resp.status != 200:
                    self.client._raise_for(resp, resp.read())
                h = hashlib.sha256()
                while True:
                    chunk = resp.read(1 << 16)
                    if not chunk:
                        break
                    h.update(chunk)
                    view = memoryview(chunk)
                    while view:
                        n = os.write(out, view)
                        view = view[n:]
            except (http.client.HTTPException, ConnectionError) as e:
                raise SafexConnectionError(f"reading file {name!r} of run {self.run_id}: {e}")
            finally:
                resp.close()
                conn.close()
            digest = h.hexdigest()
            _check_digest(resp, digest, name)
            listed = entry.get("sha256")
            if isinstance(listed, str) and listed.lower() != digest:
                raise SafexProtocolError(f"file {name!r}: its bytes do not match the listed "
                                         f"sha256 {listed}")
            os.fsync(out)
        finally:
            os.close(out)


def _check_digest(resp, digest, name):
    header = resp.getheader("Safex-Sha256")
    if header is None:
        raise SafexProtocolError(f"file {name!r}: the answer has no Safex-Sha256 header")
    if header.strip().lower() != digest:
        raise SafexProtocolError(
            f"file {name!r}: SHA-256 {digest} does not match Safex-Sha256 {header.strip()}")


def _follow(handle, on_stdout, on_stderr, on_event, timeout=None):
    """Follows a run's events until its result when any callback is given, calling them as the
    output arrives (run() and Session.exec())."""
    if not (on_stdout or on_stderr or on_event):
        return
    for event in handle.events(timeout=timeout):
        if on_event:
            on_event(event)
        kind = event.get("type")
        if kind == "stdout" and on_stdout:
            on_stdout(_event_data(event))
        elif kind == "stderr" and on_stderr:
            on_stderr(_event_data(event))


def _remaining(deadline):
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the deadline has passed")
    return left


class SessionFiles:
    """The files of a session's writable mounts (PUT and GET /v1/sessions/ID/files/PATH)."""

    def __init__(self, session):
        self._session = session

    def _path(self, path):
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"session file paths are absolute paths inside the sandbox: {path!r}")
        return self._session._path("/files" + urllib.parse.quote(path, safe="/"))

    def write(self, path, data):
        """Writes (creates or replaces) the file `path` with `data` (bytes or str, UTF-8) as the
        program's user; missing directories are made. Returns {"path", "bytes", "sha256"}."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        return self._session._client._json(
            "PUT", self._path(path), bytes(data),
            headers={"Content-Type": "application/octet-stream"})

    def read(self, path):
        """The bytes of the file `path` (after the policy's validators for it), checked against
        the digest the service sends."""
        resp, raw = self._session._client._request("GET", self._path(path))
        _check_digest(resp, hashlib.sha256(raw).hexdigest(), path)
        return raw


class Session:
    """One agent session (docs/api.md, "Sessions"): one sandbox for one task, several commands
    in it. Use it as a context manager, or call close(). Files written by one command are there
    for the next; nothing a command starts outlives it."""

    def __init__(self, client, info):
        self._client = client
        self.info = info
        self.id = info["session_id"]
        self.files = SessionFiles(self)

    def __repr__(self):
        return f"Session({self.id!r})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _path(self, suffix=""):
        return "/v1/sessions/" + urllib.parse.quote(self.id, safe="") + suffix

    def exec(self, argv, stdin=None, on_stdout=None, on_stderr=None, on_event=None,
             timeout=None):
        """Runs `argv` as the session's next command and returns its RunResult (the same
        object as a run's). on_stdout / on_stderr / on_event as for SafexClient.run."""
        body = {"argv": list(argv), "wait": False}
        if stdin is not None:
            body["stdin"] = _b64(stdin)
        resp, raw = self._client._request("POST", self._path("/exec"),
                                          json.dumps(body).encode())
        try:
            answer = json.loads(raw)
        except ValueError as e:
            raise SafexProtocolError(f"POST {self._path('/exec')}: not JSON: {e}", raw)
        if resp.status == 200 and isinstance(answer, dict) and "verdict" in answer:
            return RunResult(answer)
        if resp.status != 202:
            raise SafexProtocolError(f"POST {self._path('/exec')}: status {resp.status}", answer)
        handle = RunHandle(self._client, answer["run_id"], accepted=answer)
        _follow(handle, on_stdout, on_stderr, on_event, timeout)
        result = handle.wait(timeout=timeout)
        # The session was busy (409) or ended (410) when the command's turn came: an error of
        # the session, not a result of the command.
        error = result.get("error")
        if result.verdict == "refused" and isinstance(error, dict) and \
                error.get("status") in (409, 410):
            raise SafexError(error["status"], error.get("message", ""), result.raw)
        return result

    def state(self):
        """GET /v1/sessions/ID: its state, command count and limits."""
        return self._client._json("GET", self._path())

    def close(self):
        """Ends the session (DELETE): its sandbox is destroyed. Closing twice is harmless."""
        try:
            return self._client._json("DELETE", self._path())
        except SafexError as e:
            if e.status == 404:
                return None
            raise


class SafexClient:
    """The runs API of one `safex serve` at `socket_path`. `timeout` (seconds) bounds each
    ordinary request; event streams and wait() have their own (default: none)."""

    def __init__(self, socket_path=DEFAULT_SOCKET, timeout=60.0):
        self.socket_path = socket_path
        self.timeout = timeout

    # --- plumbing -------------------------------------------------------------------------

    def _open(self, method, path, body=None, headers=None, timeout=-1):
        """Sends one request; returns (connection, response) with the body unread."""
        conn = _UnixHTTPConnection(self.socket_path,
                                   timeout=self.timeout if timeout == -1 else timeout)
        hdrs = {"Connection": "close"}
        if body is not None:
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        try:
            conn.request(method, path, body=body, headers=hdrs)
            return conn, conn.getresponse()
        except socket.timeout:
            conn.close()
            raise TimeoutError(f"{method} {path}: no answer within the timeout") from None
        except (FileNotFoundError, ConnectionRefusedError) as e:
            conn.close()
            raise SafexConnectionError(f"the safex service is not running (nothing listens on "
                                       f"{self.socket_path}: {e.strerror})") from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            if isinstance(e, OSError) and e.errno == errno.EACCES:
                raise SafexConnectionError(f"no permission to connect to {self.socket_path}")
            raise SafexConnectionError(f"{method} {path}: {e}") from None

    def _raise_for(self, resp, raw):
        """Raises SafexError for an error answer (`raw` its body bytes)."""
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        message = resp.reason
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            message = body["error"].get("message", message)
        raise SafexError(resp.status, message, body)

    def _request(self, method, path, body=None, headers=None, timeout=-1):
        """One exchange: (response, body bytes). Error answers raise SafexError."""
        conn, resp = self._open(method, path, body, headers, timeout)
        try:
            raw = resp.read()
        except socket.timeout:
            raise TimeoutError(f"{method} {path}: the answer did not arrive in time") from None
        except (http.client.HTTPException, ConnectionError) as e:
            raise SafexConnectionError(f"{method} {path}: the answer broke off: {e}") from None
        finally:
            resp.close()
            conn.close()
        if resp.status >= 400:
            self._raise_for(resp, raw)
        return resp, raw

    def _json(self, method, path, body=None, headers=None, expect=(200,), timeout=-1):
        resp, raw = self._request(method, path, body, headers, timeout)
        if resp.status not in expect:
            raise SafexProtocolError(f"{method} {path}: unexpected status {resp.status}", raw)
        try:
            return json.loads(raw)
        except ValueError as e:
            raise SafexProtocolError(f"{method} {path}: the answer is not JSON: {e}", raw)

    # --- the API --------------------------------------------------------------------------

    def run(self, policy, argv, stdin=None, files=None, wall_time_ms=None, idempotency_key=None,
            on_stdout=None, on_stderr=None, on_event=None, env=None, cwd=None):
        """Starts `argv` under `policy` (POST /v1/runs with "wait": false) and returns its
        RunHandle at once.

        stdin: bytes or str. files: the input directory, {name: bytes|str} or [(name, data)].
        wall_time_ms: a shorter wall-time limit than the policy's. env ({name: value}) and cwd:
        only what the policy's `caller` block lets callers choose (else SafexError 400 on wait()).
        idempotency_key: a retried
        call with the same key (and body) returns the same run instead of starting another.
        on_stdout / on_stderr (called with str, or bytes for non-UTF-8 output) and on_event
        (called with every event dict): when any is given, run() follows the run's events,
        calls them as output arrives and returns after the result (handle.result is set)."""
        body = {"policy": policy, "argv": list(argv), "wait": False}
        if stdin is not None:
            body["stdin"] = _b64(stdin)
        if files:
            items = files.items() if isinstance(files, dict) else files
            body["files"] = [{"name": n, "data": _b64(d)} for n, d in items]
        if wall_time_ms is not None:
            body["wall_time_ms"] = int(wall_time_ms)
        if env:
            body["env"] = {str(k): str(v) for k, v in env.items()}
        if cwd is not None:
            body["cwd"] = cwd
        headers = {}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        resp, raw = self._request("POST", "/v1/runs", json.dumps(body).encode(), headers)
        try:
            answer = json.loads(raw)
        except ValueError as e:
            raise SafexProtocolError(f"POST /v1/runs: the answer is not JSON: {e}", raw)
        if resp.status == 202:
            handle = RunHandle(self, answer["run_id"], accepted=answer)
        elif resp.status == 200 and isinstance(answer, dict) and "verdict" in answer:
            # Already decided at admission (e.g. a policy that does not compile: `refused`).
            return RunHandle(self, answer.get("run_id", ""), result=answer)
        else:
            raise SafexProtocolError(f"POST /v1/runs: unexpected status {resp.status}", answer)
        _follow(handle, on_stdout, on_stderr, on_event)
        return handle

    def session(self, policy):
        """Opens a session of `policy` (POST /v1/sessions; the policy must allow sessions) and
        returns it: `with client.session("p") as s: s.files.write(...); s.exec([...])`."""
        info = self._json("POST", "/v1/sessions", json.dumps({"policy": policy}).encode(),
                          expect=(201,))
        return Session(self, info)

    def handle(self, run_id):
        """A RunHandle for a run started earlier (by this process or another of the same uid)."""
        return RunHandle(self, run_id)

    def get(self, run_id):
        """GET /v1/runs/ID: the run's state object (docs/api.md)."""
        return self._json("GET", "/v1/runs/" + urllib.parse.quote(run_id, safe=""))

    def list_runs(self, limit=20):
        """GET /v1/runs?limit=N: the caller's runs (root: everyone's), a list of dicts."""
        answer = self._json("GET", f"/v1/runs?limit={int(limit)}")
        return answer.get("runs", []) if isinstance(answer, dict) else answer

    def health(self):
        """GET /v1/health: the service's status and counts."""
        return self._json("GET", "/v1/health")

    def metrics(self):
        """GET /metrics: the Prometheus text."""
        _, raw = self._request("GET", "/metrics")
        return raw.decode("utf-8", "replace")
