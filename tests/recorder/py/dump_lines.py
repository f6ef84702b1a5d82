# Prints, for every code object of a few standard-library modules (nested
# ones too), its location table and the line CPython gives each bytecode
# offset, for test_pylines.c:
#   code FIRSTLINENO HEX_LINETABLE
#   OFFSET LINE          (LINE -1 = no line)
# Exits 77 (skipped) on Python older than 3.11, whose tables differ.
import sys

if sys.version_info < (3, 11):
    sys.exit(77)

import argparse, asyncio, dis, email.parser, inspect, json, threading  # noqa: E401


def walk(co):
    yield co
    for c in co.co_consts:
        if hasattr(c, "co_lines"):
            yield from walk(c)


for mod in (argparse, asyncio.base_events, dis, email.parser, inspect, json.decoder, threading):
    with open(mod.__file__) as f:
        top = compile(f.read(), mod.__file__, "exec")
    for co in walk(top):
        print("code", co.co_firstlineno, co.co_linetable.hex())
        for start, end, line in co.co_lines():
            for off in range(start, end, 2):
                print(off, -1 if line is None else line)
