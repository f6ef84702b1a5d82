"""The %%memsnap cell magic (IPython; `%load_ext memsnap`).

    %%memsnap [-o FILE] [--top N] [--width W] [--no-torch]
    y = model(x)

runs the cell while recording PyTorch's allocations in this process
(memsnap.record), then shows the timeline (the SVG of `memsnap render
--format svg`, the bundled binary) and the summary's highlights: peak
allocated, what was still allocated at the end, OOMs, leak suspects and the
top sites with their Python lines.  -o keeps the snapshot (else it goes to
a temporary file, removed once shown); --no-torch records only what calls
the recorder's API itself (memsnap.record's torch=False).  The cell runs as
any cell (its output, its exceptions); a cell that raises still shows what
it allocated up to then, and the magic then fails too (CellFailed, one line),
so that Run All stops there.

report(path) builds the same (SVG text, HTML text) from any snapshot, and
record_cell() runs code the same way without IPython (tests/gpu).
"""
import html
import os
import shlex
import subprocess
import tempfile

from . import paths
from ._sizes import format_size


def render_svg(path, width=900):
    """The timeline of a snapshot as SVG text (`memsnap render --format
    svg`); None when it cannot be drawn (a line says why in the error)."""
    with tempfile.TemporaryDirectory(prefix="memsnap-nb-") as d:
        prefix = os.path.join(d, "cell")
        r = subprocess.run([paths()["memsnap"], "render", path, "-o", prefix, "--format",
                            "svg", "--width", str(int(width))],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = prefix + "-timeline.svg"
        if r.returncode not in (0, 1) or not os.path.exists(out):
            # its one line already says "memsnap render: ..."
            raise RuntimeError(r.stderr.decode(errors="replace").strip() or
                               "memsnap render: exit %d" % r.returncode)
        with open(out, encoding="utf-8") as f:
            return f.read()


def highlights(path, top=5):
    """The summary's highlights of a snapshot as HTML text."""
    from ._snapshot import Snapshot
    snap = Snapshot(path)
    s = snap.summary(top=top)
    p = s["process"]
    layer = "allocated" if s["allocated_seen"] else "reserved"
    lv = p[layer]
    if not s["events"]["total"]:
        return ('<div class="memsnap"><p>memsnap: nothing was recorded (no allocation '
                'reached the recorder while the cell ran)</p></div>')
    rows = [("events", "%d" % s["events"]["total"]),
            ("peak %s" % layer, format_size(lv["peak"]) if lv else "-"),
            ("%s at the end" % layer, format_size(lv["final"]) if lv else "-")]
    if s["oom_count"]:
        rows.append(("OOMs", "%d" % s["oom_count"]))
    leaks = s["findings"]["leak_suspects"]
    if leaks:
        rows.append(("leak suspects", "%d" % len(leaks)))
    h = ['<div class="memsnap">', '<table>']
    h += ["<tr><th style='text-align:left'>%s</th><td>%s</td></tr>"
          % (html.escape(k), html.escape(v)) for k, v in rows]
    h.append("</table>")
    sites = s["top_sites"].get(layer) or []
    if sites:
        h.append("<p>top %s sites by peak:</p><table>" % layer)
        h.append("<tr><th>peak</th><th>count</th><th>site</th></tr>")
        for x in sites[:top]:
            h.append("<tr><td>%s</td><td>%d</td><td><code>%s</code></td></tr>"
                     % (format_size(x["peak"]), x["count"], html.escape(x.get("label", "?"))))
        h.append("</table>")
    h.append("</div>")
    return "\n".join(h)


def report(path, top=5, width=900):
    """(SVG text of the timeline, HTML of the highlights) of a snapshot."""
    return render_svg(path, width), highlights(path, top)


class UsageError(ValueError):
    """A bad %%memsnap line (IPython shows it as a usage error)."""


class CellFailed(Exception):
    """The cell under %%memsnap raised: the magic fails too (so Run All
    stops there), after showing what the cell allocated.  The cell's own
    traceback is already shown: IPython prints this one as one line."""

    def _render_traceback_(self):
        return [str(self)]


def _parse(line):
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):      # not SystemExit: the notebook goes on
            raise UsageError("%%%%memsnap: %s" % message)

    ap = Parser(prog="%%memsnap", add_help=False)
    ap.add_argument("-o", "--output", default=None)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--width", type=int, default=900)
    ap.add_argument("--no-torch", action="store_true")
    try:
        words = shlex.split(line or "")
    except ValueError as e:            # an unclosed quote
        raise UsageError("%%%%memsnap: %s" % e) from None
    a = ap.parse_args(words)
    if a.top < 0 or a.top > 24:
        raise UsageError("%%%%memsnap: --top wants 0 to 24, got %d" % a.top)
    if a.width < 300 or a.width > 20000:
        raise UsageError("%%%%memsnap: --width wants 300 to 20000 pixels, got %d" % a.width)
    return a


def record_cell(code, run=None, path=None, top=5, width=900, torch=True):
    """Records code while it runs (run(code) when given, else exec in a
    fresh namespace) into path (a temporary file when None, removed after)
    and returns (svg, html, result of run).  What the magic does."""
    from ._record import Recording
    tmp = path is None
    if tmp:
        fd, path = tempfile.mkstemp(prefix="memsnap-cell-", suffix=".msnap")
        os.close(fd)
    try:
        rec = Recording(path, torch=torch)
        rec.start()
        try:
            result = run(code) if run else exec(compile(code, "<cell>", "exec"), {})
        finally:
            rec.stop()
        svg, text = report(path, top, width)
        return svg, text, result
    finally:
        if tmp:
            try:
                os.unlink(path)
            except OSError:
                pass


def register(ipython):
    """Registers %%memsnap with an IPython shell."""
    from IPython.display import HTML, SVG, display

    from IPython.core.error import UsageError as IPythonUsageError

    def memsnap(line, cell):
        try:
            a = _parse(line)
        except UsageError as e:
            raise IPythonUsageError(str(e)) from None
        svg, text, result = record_cell(cell, run=lambda c: ipython.run_cell(c),
                                        path=a.output, top=a.top, width=a.width,
                                        torch=not a.no_torch)
        display(SVG(svg))
        display(HTML(text + ("<p>snapshot: <code>%s</code></p>" % html.escape(a.output)
                             if a.output else "")))
        # a cell that raised is a failed cell (Run All stops there), after
        # showing what it allocated
        if result is not None and not result.success:
            e = result.error_in_exec or result.error_before_exec
            raise CellFailed("%%%%memsnap: the cell raised %s (its traceback is above; the "
                             "recording up to then is shown)" % (type(e).__name__ if e else
                                                                "an error"))

    memsnap.__doc__ = __doc__
    ipython.register_magic_function(memsnap, magic_kind="cell", magic_name="memsnap")
