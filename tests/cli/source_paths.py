#!/usr/bin/env python3
"""source_paths.py ROOT: the comments of memsnap's C sources name files that
exist, and each library's headers use its own include guard.

  - every "dir/file.c|h|cpp|md" the sources of the libraries and the CLI
    name (analyze/label.c, docs/render.md, include/memsnap/alloc.h, ...)
    is a file of the tree: a module that moved leaves no pointer to where
    it was (viz/label.c, interop/replay.c, include/memsnap/state.h);
  - a header of analyze/, whatif/ or viz/ guards itself with
    MEMSNAP_<FOLDER>_<NAME>_H (the folder's own header: MEMSNAP_<FOLDER>_H).
Exit 0, or 1 after one line per finding."""
import os
import re
import sys

root = sys.argv[1]
DIRS = ["analyze", "whatif", "viz", "interop", "cli", "format", "recorder", "allocator",
        "simdev", "symbolize", "torch", "include/memsnap", "workloads"]
PATH = re.compile(r"(?<![\w./-])((?:%s|docs|tests|python|scripts|bench)/[\w./-]*\w\.(?:c|h|cpp|md))\b"
                  % "|".join(re.escape(d) for d in DIRS))
fails = 0
for d in DIRS:
    top = os.path.join(root, d)
    for dirpath, _, files in os.walk(top):
        for f in sorted(files):
            if not f.endswith((".c", ".h", ".cpp")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            text = open(path, encoding="utf-8", errors="replace").read()
            for n, line in enumerate(text.splitlines(), 1):
                if line.lstrip().startswith("#include <"):
                    continue   # another project's header (torch/csrc/...)
                for m in PATH.finditer(line):
                    if not os.path.exists(os.path.join(root, m.group(1))):
                        print(f"{rel}:{n}: names {m.group(1)}, which is not in the tree")
                        fails += 1
            folder = os.path.relpath(dirpath, root)
            if f.endswith(".h") and folder in ("analyze", "whatif", "viz"):
                name = re.sub(r"\W", "_", f[:-2]).upper()
                # the library's own header (whatif/whatif.h): MEMSNAP_WHATIF_H
                want = "MEMSNAP_%s_H" % name if name == folder.upper() else \
                    "MEMSNAP_%s_%s_H" % (folder.upper(), name)
                g = re.search(r"^#ifndef (\w+)\s*\n#define \1\b", text, re.M)
                if not g or g.group(1) != want:
                    print(f"{rel}: include guard {g.group(1) if g else '(none)'}, expected {want}")
                    fails += 1
sys.exit(1 if fails else 0)
