#!/usr/bin/env python3
"""Fails when a function in drivers/ or supervisor/ is longer than MAX_LINES (docs/architecture.md:
short linear functions whose order is explained; the drivers' Run() are scripts over named
steps). Counts from the line of a function's opening brace to its closing brace, for the outermost
function bodies only (lambdas inside count as part of their function). A light parser: strings,
characters and comments are blanked before braces are matched."""
import re
import sys
from pathlib import Path

MAX_LINES = 120
DIRS = ["drivers", "supervisor"]
NOT_FUNCTIONS = re.compile(r"\b(if|for|while|switch|catch|do|else|return|namespace|class|struct|"
                           r"enum|union|extern)\b")


def blank(text):
    # Comments, string and character literals become spaces (newlines kept).
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = ")" + (m.group(1) if m else "") + '"'
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and 0 < i < n - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
            out.append(c)  # a digit separator: 1'000'000
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(path):
    text = blank(path.read_text(errors="replace"))
    found = []
    depth = 0
    func_depth = None  # brace depth at which the current outermost function's body opened
    start_line = 0
    header_start = 0
    for i, c in enumerate(text):
        if c == "{":
            if func_depth is None:
                header = text[header_start:i].strip()
                looks_like_function = (header.endswith(")") or re.search(
                    r"\)\s*(const|override|noexcept|final|\s)*(->\s*[\w:<>,\s*&]+)?$", header))
                if looks_like_function and "(" in header and not NOT_FUNCTIONS.match(
                        header.split("\n")[-1].strip()) and not header.rstrip().endswith("]"):
                    last = header.split(";")[-1]
                    if not re.search(r"=\s*\[", last) and "=" not in last.split("(")[0]:
                        func_depth = depth
                        start_line = text.count("\n", 0, i) + 1
            depth += 1
            header_start = i + 1
        elif c == "}":
            depth -= 1
            if func_depth is not None and depth == func_depth:
                end_line = text.count("\n", 0, i) + 1
                if end_line - start_line + 1 > MAX_LINES:
                    name = text[max(0, text.rfind("\n", 0, text.rfind("(", 0, i))):].split("(")[0]
                    found.append((start_line, end_line - start_line + 1))
                func_depth = None
            header_start = i + 1
        elif c == ";":
            header_start = i + 1
    return found


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = []
    for d in DIRS:
        for f in sorted((root / d).rglob("*.cc")):
            for line, length in long_functions(f):
                bad.append(f"{f.relative_to(root)}:{line}: a function of {length} lines "
                           f"(at most {MAX_LINES}: split it into named steps)")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
