# Prints, for every code object of a few standard-library modules (nested
# ones too), its location table and the line CPython gives each bytecode
# offset, for test_pylines.c:
#   minor MINOR          (once: 9, 10, 11, ...: which table format follows)
#   code FIRSTLINENO HEX_TABLE
#   OFFSET LINE          (LINE -1 = no line)
# The table is co_linetable (3.10+) or co_lnotab (3.9); the lines come from
# co_lines() (3.10+) or dis.findlinestarts (3.9).  Exits 77 (skipped) on
# Python older than 3.9.
import sys

if sys.version_info < (3, 9):
    sys.exit(77)

import argparse, asyncio, dis, email.parser, inspect, json, threading  # noqa: E401


def walk(co):
    yield co
    for c in co.co_consts:
        if hasattr(c, "co_code"):
            yield from walk(c)


def lines(co):
    """(start, end, line) ranges of co's bytecode, as CPython gives them."""
    if hasattr(co, "co_lines"):
        yield from co.co_lines()
        return
    starts = list(dis.findlinestarts(co))
    for i, (start, line) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(co.co_code)
        yield start, end, line


print("minor", sys.version_info[1])


for mod in (argparse, asyncio.base_events, dis, email.parser, inspect, json.decoder, threading):
    with open(mod.__file__) as f:
        top = compile(f.read(), mod.__file__, "exec")
    for co in walk(top):
        table = co.co_linetable if sys.version_info >= (3, 10) else co.co_lnotab
        print("code", co.co_firstlineno, table.hex())
        for start, end, line in lines(co):
            for off in range(start, end, 2):
                print(off, -1 if line is None else line)
