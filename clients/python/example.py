#!/usr/bin/env python3
"""Runs a little Python program under the `python-untrusted` policy of a running `safex serve`,
prints its output as it arrives, then fetches the file it wrote.

    python3 clients/python/example.py [SOCKET]
"""
import sys

from safex_client import SafexClient, SafexError

PROGRAM = """
import json, time
for i in range(3):
    print("step", i)
    time.sleep(0.5)
with open("/data/out/result.json", "w") as f:
    json.dump({"answer": 42}, f)
"""


def main():
    client = SafexClient(sys.argv[1] if len(sys.argv) > 1 else "/run/safex/safex.sock")
    try:
        handle = client.run(
            "python-untrusted", ["python3", "/data/in/main.py"],  # input files are in /data/in
            files={"main.py": PROGRAM},
            on_stdout=lambda text: print("out:", text, end=""),
            on_stderr=lambda text: print("err:", text, end="", file=sys.stderr))
        result = handle.wait()
        print(f"run {handle.run_id}: {result.verdict} (exit status {result.exit_status})")
        for entry in handle.files:
            print(entry["name"], entry["size"], handle.fetch(entry["name"]))
    except SafexError as e:
        print(f"safex: {e}", file=sys.stderr)
        return 1
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
