"""Shared by the Python package's tests (tests/python, docs/python.md).

They run on the package as pytest imports it: the build tree's
(PYTHONPATH=build/python, ctest python.*) or an installed wheel
(tests/install/wheel_test.sh).  Fixtures are the checked-in snapshots of
the CLI's and the interop tests; MEMSNAP_SRC_DIR names the source tree
(default: two folders up from here).
"""
import os
import pathlib
import subprocess

import pytest

import memsnap

pytest_plugins = ["pytester"]

if not hasattr(pytest, "Pytester"):
    # pytest before 6.2 (Debian 11 has 6.0.2: the wheel's tests run there,
    # tests/install/manylinux_test.sh) has testdir, not pytester: the same
    # tool, with its folder as .tmpdir (a py.path) where pytester has .path.
    class _Pytester:
        def __init__(self, testdir):
            self._testdir = testdir
            self.path = pathlib.Path(str(testdir.tmpdir))

        def __getattr__(self, name):
            return getattr(self._testdir, name)

    @pytest.fixture
    def pytester(testdir):
        return _Pytester(testdir)

SRC = os.environ.get("MEMSNAP_SRC_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fixture(rel):
    return os.path.join(SRC, rel)


@pytest.fixture(scope="session")
def memsnap_bin():
    p = memsnap.paths()["memsnap"]
    assert p, "the package has no memsnap binary"
    return p


def cli(*args, check=True):
    """Runs the package's memsnap binary: (exit status, stdout, stderr)."""
    r = subprocess.run([memsnap.paths()["memsnap"]] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if check and r.returncode not in (0, 1):
        raise AssertionError("memsnap %s: %d %s" % (" ".join(args), r.returncode,
                                                    r.stderr.decode()))
    return r.returncode, r.stdout.decode(), r.stderr.decode()
