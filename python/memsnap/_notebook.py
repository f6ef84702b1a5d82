"""The %%memsnap cell magic (IPython; `%load_ext memsnap`).

    %%memsnap [-o FILE] [--top N] [--width W] [--no-torch]
    y = model(x)

runs the cell while recording PyTorch's allocations in this process
(memsnap.record), then shows the timeline (the SVG of `memsnap render
--format svg`, the bundled binary) and the summary's highlights (in a
front end that draws neither, IPython in a terminal: the first screen of
`memsnap summary` as text): peak
allocated, what was still allocated at the end, OOMs, leak suspects and the
top sites with their Python lines.  -o keeps the snapshot (else it goes to
a temporary file, removed once shown); --no-torch records only what calls
the recorder's API itself (memsnap.record's torch=False).  The cell runs as
any cell (its output, its exceptions); a cell that raises still shows what
it allocated up to then, and the magic then fails too (CellFailed, one line),
so that Run All stops there.  Where it cannot record (no PyTorch without
--no-torch, a recording running already), one line says why and what to
try, and the cell runs unrecorded.

report(path) builds the same (SVG text, HTML text) from any snapshot, and
record_cell() runs code the same way without IPython (tests/gpu).
"""
import html
import os
import shlex
import subprocess
import sys
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


def text_report(path, top=5):
    """The first screen of `memsnap summary` (the peaks, what was live at the
    peak by site, the findings) as text: what the magic shows where the
    front end draws no SVG or HTML (IPython in a terminal)."""
    r = subprocess.run([paths()["memsnap"], "summary", "--top", str(int(top)), path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode not in (0, 1):
        raise RuntimeError(r.stderr.decode(errors="replace").strip() or
                           "memsnap summary: exit %d" % r.returncode)
    lines = r.stdout.decode(errors="replace").splitlines()
    if "---- details" in lines:
        lines = lines[:lines.index("---- details")]
    while lines and (not lines[-1].strip() or lines[-1].startswith(("(below:", " --stacks"))):
        lines.pop()
    return "\n".join(lines) + "\n"


class NotRecorded(RuntimeError):
    """memsnap.record() cannot record here (no PyTorch, a recording running
    already): the magic runs the cell unrecorded and says why in one line."""


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


def record_cell(code, run=None, path=None, top=5, width=900, torch=True, text=False):
    """Records code while it runs (run(code) when given, else exec in a
    fresh namespace) into path (a temporary file when None, removed after)
    and returns (svg, html, result of run), or with text (a front end that
    draws neither) (None, text_report, result).  What the magic does.
    NotRecorded (nothing run) when memsnap.record() cannot record here."""
    from ._record import Recording
    tmp = path is None
    if tmp:
        fd, path = tempfile.mkstemp(prefix="memsnap-cell-", suffix=".msnap")
        os.close(fd)
    try:
        from ._record import RecordError
        rec = Recording(path, torch=torch)
        try:
            rec.start()
        except RecordError as e:
            raise NotRecorded(str(e)) from None
        try:
            result = run(code) if run else exec(compile(code, "<cell>", "exec"), {})
        finally:
            rec.stop()
        if text:
            return None, text_report(path, top), result
        svg, html_text = report(path, top, width)
        return svg, html_text, result
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
        # a front end that shows SVG and HTML (a notebook), else text
        rich = "image/svg+xml" in (getattr(ipython.display_formatter, "active_types", None)
                                   or ["image/svg+xml"])
        try:
            svg, text, result = record_cell(cell, run=lambda c: ipython.run_cell(c),
                                            path=a.output, top=a.top, width=a.width,
                                            torch=not a.no_torch, text=not rich)
        except NotRecorded as e:
            # one line, not a traceback, and the cell runs all the same
            sys.stderr.write("%%%%memsnap: not recorded: %s%s; the cell runs unrecorded\n"
                             % (e, "" if a.no_torch else
                                " (%%memsnap --no-torch records without PyTorch)"))
            sys.stderr.flush()
            result = ipython.run_cell(cell)
            if result is not None and not result.success:
                raise CellFailed("%%memsnap: the cell raised (its traceback is above)")
            return
        if rich:
            display(SVG(svg))
            display(HTML(text + ("<p>snapshot: <code>%s</code></p>" % html.escape(a.output)
                                 if a.output else "")))
        else:
            # IPython in a terminal: the summary's first screen as text
            sys.stdout.write(text + ("snapshot: %s\n" % a.output if a.output else ""))
        # a cell that raised is a failed cell (Run All stops there), after
        # showing what it allocated
        if result is not None and not result.success:
            e = result.error_in_exec or result.error_before_exec
            raise CellFailed("%%%%memsnap: the cell raised %s (its traceback is above; the "
                             "recording up to then is shown)" % (type(e).__name__ if e else
                                                                "an error"))

    memsnap.__doc__ = __doc__
    ipython.register_magic_function(memsnap, magic_kind="cell", magic_name="memsnap")
