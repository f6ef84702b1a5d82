"""The console scripts: each execs one bundled C program with the same arguments.

exec, not a child process: the program takes this process's place, so its
pid, exit status and signals are the program's own.  Two things Python
changed at start-up are put back first: the signals it ignores (SIGPIPE,
SIGXFSZ: `memsnap summary x | head` must end as the C program ends) and
LC_CTYPE, which Python sets when it coerces a C locale (PEP 538): it gets
the value this process was started with (/proc/self/environ), so `memsnap
run` hands the recorded program the environment it was given.
"""
import os
import signal
import sys

from . import paths


def _environ():
    """os.environ with LC_CTYPE as this process was started with it."""
    env = os.environb.copy()
    try:
        with open("/proc/self/environ", "rb") as f:
            start = dict(i.partition(b"=")[::2] for i in f.read().split(b"\0") if b"=" in i)
    except OSError:
        return env
    if b"LC_CTYPE" in start:
        env[b"LC_CTYPE"] = start[b"LC_CTYPE"]
    else:
        env.pop(b"LC_CTYPE", None)
    return env


def _exec(part, name):
    path = paths()[part]
    if path is None:
        sys.stderr.write("%s: this memsnap package was built without it "
                         "(a build without the CUDA toolkit)\n" % name)
        sys.exit(2)
    for sig in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, sig):
            signal.signal(getattr(signal, sig), signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(path, [name] + sys.argv[1:], _environ())
    except OSError as e:
        sys.stderr.write("%s: cannot run %s: %s\n" % (name, path, e.strerror))
        sys.exit(127)


def main():
    """memsnap: the command line."""
    _exec("memsnap", "memsnap")


def smoke():
    """memsnap-smoke: a small CUDA program to record."""
    _exec("smoke", "memsnap-smoke")


def decode():
    """memsnap-decode: the decode workload (docs/workload.md)."""
    _exec("decode", "memsnap-decode")
