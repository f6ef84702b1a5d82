#!/usr/bin/env python3
"""The SVG pictures of `memsnap render --format svg` and `memsnap compare
-o X.svg`, read as XML (python's xml.etree; xmllint --noout too when it is
installed), checked by structure, not by pixels:

  - every picture is well-formed XML with the <g class=...> groups the
    painters name: title, legend with one legend-item per entry, axis-x
    with tick labels, a band per site (data-label = the legend's site
    label), the OOM marker with its text, a segment row per segment;
  - the same entries as the PNG of the same command (the legend entries and
    the title are read from the SVG; the PNG is checked to exist and be a
    PNG: both come from one display list in viz/canvas.c);
  - nothing is cut or overlapping: every <text> lies inside the picture
    (x + its measured width, textLength, at most the width) and no two
    <text> boxes overlap, at --width 800 and 1600;
  - a band that covers the plot is one <path>, not one rectangle per column;
  - compare: a table row per snapshot, the changed sites.

usage: svg_structure.py MEMSNAP DATA_DIR SCRATCH_DIR
"""
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

WIDTHS = (800, 1600)
NS = "{http://www.w3.org/2000/svg}"
fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print("FAIL:", what)


def run(*args):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode == 0, "%s -> %d: %s" % (" ".join(args), p.returncode, p.stderr))
    return p.stdout


def load(path):
    if shutil.which("xmllint"):
        r = subprocess.run(["xmllint", "--noout", path], stderr=subprocess.PIPE, text=True)
        check(r.returncode == 0, "xmllint %s: %s" % (path, r.stderr))
    return ET.parse(path).getroot()


def groups(root, cls):
    return [g for g in root.iter(NS + "g") if cls in (g.get("class") or "").split()]


def texts(el):
    return [t.text or "" for t in el.iter(NS + "text")]


def text_boxes_ok(root, path):
    """Every text inside the picture; no two text boxes overlap."""
    W = float(root.get("width"))
    boxes = []
    for t in root.iter(NS + "text"):
        n = float(t.get("textLength"))
        size = float(t.get("font-size"))
        if t.get("transform"):   # rotated: skip the overlap test, keep the bounds
            continue
        x, y = float(t.get("x")), float(t.get("y"))
        check(x >= 0 and x + n <= W + 0.5,
              "%s: text %r from x %g, %g wide, leaves the %g-pixel picture" % (path, t.text, x, n, W))
        # the box from the cap height above the baseline to the descender
        boxes.append((x, y - 0.73 * size, x + n, y + 0.24 * size, t.text))
    boxes.sort()
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if b[0] >= a[2]:
                break
            if b[1] < a[3] - 0.5 and a[1] < b[3] - 0.5 and b[0] < a[2] - 0.5:
                check(False, "%s: texts overlap: %r and %r" % (path, a[4], b[4]))


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def main():
    memsnap, data, scratch = sys.argv[1:4]
    oom = os.path.join(data, "oom.msnap")
    basic = os.path.join(data, "basic.msnap")
    blocks = os.path.join(data, "blocks.msnap")
    for width in WIDTHS:
        pre = os.path.join(scratch, "svg%d" % width)
        out = run(memsnap, "render", oom, "-o", pre, "--format", "svg", "--width", str(width))
        check(out.split() == [pre + "-timeline.svg", pre + "-segments.svg"], "render prints the SVG paths: " + out)
        run(memsnap, "render", oom, "-o", pre, "--width", str(width))
        check(is_png(pre + "-timeline.png") and is_png(pre + "-segments.png"), "the PNGs of the same command")
        tl = load(pre + "-timeline.svg")
        check(tl.get("width") == str(width), "timeline width %s" % tl.get("width"))
        title = " ".join(texts(groups(tl, "title")[0])) if groups(tl, "title") else ""
        check(title.startswith("GPU memory over time - device 0"), "timeline title: %r" % title)
        check("139.70 GiB" in title, "the title is whole at width %d: %r" % (width, title))
        items = [g.get("data-label") for g in groups(tl, "legend-item")]
        check(any(i.startswith("0x401000") for i in items), "legend names the site: %r" % items)
        check("reserved (driver memory)" in items, "legend: reserved: %r" % items)
        check(any(i.startswith("OOM") for i in items), "legend: OOM: %r" % items)
        ooms = groups(tl, "oom")
        check(len(ooms) == 1 and ooms[0].get("data-label") == "OOM: requested 2.00 GiB",
              "one OOM marker: %r" % [g.get("data-label") for g in ooms])
        check(ooms and "OOM: requested 2.00 GiB" in texts(ooms[0]), "the OOM label is drawn")
        ticks = texts(groups(tl, "axis-x")[0]) if groups(tl, "axis-x") else []
        check(len(ticks) >= 4 and any(t.endswith(" s") for t in ticks), "x ticks: %r" % ticks)
        bands = groups(tl, "band")
        check([b.get("data-label") for b in bands] == ["0x401000"], "bands: %r" % [b.get("data-label") for b in bands])
        if bands:
            shapes = [e for e in bands[0] if e.tag in (NS + "path", NS + "rect")]
            check(1 <= len(shapes) <= 2, "the band is one path, not a rectangle per column: %d" % len(shapes))
        text_boxes_ok(tl, pre + "-timeline.svg")

        sg = load(pre + "-segments.svg")
        rows = groups(sg, "segment")
        check(len(rows) == 2, "a row per segment: %d" % len(rows))
        check(all(r.get("data-label", "").startswith("0x") for r in rows), "rows named by address")
        check(groups(sg, "title") and texts(groups(sg, "title")[0])[0].startswith("Memory segments"), "segment map title")
        text_boxes_ok(sg, pre + "-segments.svg")

        # several files and the blocks fixture: the same checks of the text
        pre2 = os.path.join(scratch, "svgr%d" % width)
        run(memsnap, "render", basic, blocks, "-o", pre2, "--format", "svg", "--width", str(width))
        multi = load(pre2 + "-timeline.svg")
        check(len(groups(multi, "panel")) >= 2, "a panel per file and device")
        text_boxes_ok(multi, pre2 + "-timeline.svg")
        for f in ("basic", "blocks"):
            text_boxes_ok(load("%s-%s-segments.svg" % (pre2, f)), f + " segments")

        cmp = os.path.join(scratch, "cmp%d.svg" % width)
        out = run(memsnap, "compare", basic, oom, "-o", cmp, "--width", str(width))
        check(out.strip().endswith(cmp), "compare prints the SVG path")
        c = load(cmp)
        rows = [g.get("data-label") for g in groups(c, "table-row")]
        check(rows == ["A: basic.msnap", "B: oom.msnap"], "table rows: %r" % rows)
        changes = [g.get("data-label") for g in groups(c, "change")]
        check("0x401000" in changes, "changed sites: %r" % changes)
        text_boxes_ok(c, cmp)

    # bad --format: one line, exit 2
    p = subprocess.run([memsnap, "render", oom, "--format", "pdf"], stderr=subprocess.PIPE, text=True)
    check(p.returncode == 2 and p.stderr.count("\n") == 1 and "--format wants png or svg" in p.stderr,
          "bad --format: %d %r" % (p.returncode, p.stderr))
    print("svg_structure: %d failure(s)" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
