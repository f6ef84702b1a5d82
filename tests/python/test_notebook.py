"""The %%memsnap cell magic (memsnap/_notebook.py).

It records the cell in-process (memsnap.record) and shows the timeline
(SVG, from the package's `memsnap render --format svg`) and the summary's
highlights.  Without PyTorch the cell records through --no-torch with a
stand-in that reports blocks through the recorder's API itself
(memsnap_trace_block, as an allocator with memsnap's trace hook does): the
recording, the render and the display are the magic's own.  With PyTorch:
tests/gpu/python_api_gpu.py."""
import os

import pytest

import memsnap
from memsnap import _notebook
from conftest import fixture

# The stand-in's blocks come through ctypes: without native frames their
# sites are named by the cell's Python lines, as PyTorch's are
# (MEMSNAP_TORCH_NATIVE_DEPTH=auto).  Read when the recorder is loaded.
os.environ["MEMSNAP_PYTHON_NATIVE_DEPTH"] = "0"

needs_recorder = pytest.mark.skipif(not memsnap.paths()["recorder"],
                                    reason="no recorder in this package")

CELL = '''
from memsnap import _record
L = _record.recorder()
def allocate_cache(n):
    L.memsnap_trace_block(1, 0, 0x7f0000000000 + n * 0x10000000, n << 20, 0)
for n in (1, 2, 3):
    allocate_cache(n)
L.memsnap_trace_block(2, 0, 0x7f0000000000 + 0x10000000, 0, 0)
print("cell ran")
'''


def test_report_of_a_fixture():
    svg, html = _notebook.report(fixture("tests/cli/data/blocks.msnap"), top=3, width=600)
    assert svg.lstrip().startswith("<?xml") or svg.lstrip().startswith("<svg")
    assert "<svg" in svg and 'width="600' in svg
    assert "peak allocated" in html and "4.00 MiB" in html
    assert "stack 3" in html                 # the top site's label


@needs_recorder
def test_record_cell_without_ipython(tmp_path):
    out = tmp_path / "cell.msnap"
    svg, html, _ = _notebook.record_cell(CELL, path=str(out), torch=False)
    assert "<svg" in svg and "peak allocated" in html
    s = memsnap.load(out).summary()
    assert s["process"]["allocated"]["peak"] == 6 << 20
    assert s["process"]["allocated"]["final"] == 5 << 20
    assert "&lt;cell&gt;:5)" in html, html     # the cell's allocating line names the site


@needs_recorder
def test_magic_in_ipython(tmp_path):
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import start_ipython
    from IPython.utils.capture import capture_output
    ip = start_ipython()
    # the test shell shows text only; a notebook's front end takes SVG and HTML
    ip.display_formatter.active_types = ["text/plain", "text/html", "image/svg+xml"]
    ip.run_line_magic("load_ext", "memsnap")
    out = tmp_path / "magic.msnap"
    with capture_output() as cap:
        ip.run_cell_magic("memsnap", "--no-torch -o %s --top 3 --width 700" % out, CELL)
    assert "cell ran" in cap.stdout
    kinds = [sorted(o.data) for o in cap.outputs]
    svgs = [o.data["image/svg+xml"] for o in cap.outputs if "image/svg+xml" in o.data]
    htmls = [o.data["text/html"] for o in cap.outputs if "text/html" in o.data]
    assert len(svgs) == 1 and "<svg" in svgs[0], kinds
    assert len(htmls) == 1 and "peak allocated" in htmls[0] and "6.00 MiB" in htmls[0]
    assert "allocate_cache (" in htmls[0]
    assert str(out) in htmls[0] and os.path.exists(out)
    # the cell's variables are the notebook's, as for any cell
    assert "allocate_cache" in ip.user_ns
    # a cell that raises: IPython shows its error, the magic what it recorded,
    # and the cell counts as failed (Run All stops there)
    with capture_output() as cap:
        with pytest.raises(_notebook.CellFailed, match="the cell raised ValueError"):
            ip.run_cell_magic("memsnap", "--no-torch", CELL + "\nraise ValueError('boom')\n")
    assert any("image/svg+xml" in o.data for o in cap.outputs)
    with capture_output() as cap:
        r = ip.run_cell("%%memsnap --no-torch\n" + CELL + "\nraise ValueError('boom')\n")
    assert not r.success and isinstance(r.error_in_exec, _notebook.CellFailed), r
    assert any("image/svg+xml" in o.data for o in cap.outputs)
    # a bad line: a usage error, nothing run (no SystemExit)
    from IPython.core.error import UsageError
    for line in ("--bogus", "--width -5", "--top 99", "-o 'unclosed"):
        with pytest.raises(UsageError, match="%%memsnap"):
            ip.run_cell_magic("memsnap", line, "raise AssertionError('ran')")


@needs_recorder
def test_magic_without_pytorch_runs_the_cell(tmp_path):
    """%%memsnap where PyTorch is not importable (this Python): one line that
    says so and names --no-torch, no traceback, and the cell runs (issue 35
    item 12: a 30-line traceback and the cell not run)."""
    pytest.importorskip("IPython")
    try:
        import torch  # noqa: F401
        if getattr(torch, "cuda", None) is not None:
            pytest.skip("PyTorch is importable here")
    except ImportError:
        pass
    from IPython.testing.globalipapp import start_ipython
    from IPython.utils.capture import capture_output
    from IPython import get_ipython
    ip = start_ipython() or get_ipython()   # one shell a process: started once
    ip.run_line_magic("load_ext", "memsnap")
    with capture_output() as cap:
        ip.run_cell_magic("memsnap", "", "ran_unrecorded = 42\nprint('cell ran')\n")
    assert "cell ran" in cap.stdout
    assert ip.user_ns.get("ran_unrecorded") == 42
    err = [l for l in cap.stderr.splitlines() if l.strip()]
    assert len(err) == 1, cap.stderr
    assert err[0].startswith("%%memsnap: not recorded: PyTorch is not importable here")
    assert "(%%memsnap --no-torch records without PyTorch); the cell runs unrecorded" in err[0]
    assert "Traceback" not in cap.stderr + cap.stdout


@needs_recorder
def test_magic_text_outside_notebooks(tmp_path):
    """A front end that draws no SVG or HTML (IPython in a terminal): the
    summary's first screen as text, not "<IPython.core.display.SVG object>"."""
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import start_ipython
    from IPython.utils.capture import capture_output
    from IPython import get_ipython
    ip = start_ipython() or get_ipython()   # one shell a process: started once
    saved = ip.display_formatter.active_types
    ip.display_formatter.active_types = ["text/plain"]
    try:
        ip.run_line_magic("load_ext", "memsnap")
        out = tmp_path / "text.msnap"
        with capture_output() as cap:
            ip.run_cell_magic("memsnap", "--no-torch -o %s" % out, CELL)
    finally:
        ip.display_formatter.active_types = saved
    assert "cell ran" in cap.stdout
    assert not cap.outputs, [o.data for o in cap.outputs]
    text = cap.stdout
    assert "\npeaks\n" in text and "live at the peak of allocated" in text, text
    assert "allocate_cache (" in text and "findings" in text
    assert "---- details" not in text and "snapshot: %s" % out in text
