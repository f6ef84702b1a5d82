"""memsnap.load(path) -> Snapshot: a snapshot read from Python.

Every answer is one read of the file by memsnap's C analysis library
(libmemsnap_py.so, analyze/pyapi.h): the same read loop, state model, site
labels and summary as the `memsnap` command, so the figures agree with
`memsnap summary`.  Tables come over as numpy arrays built in C (no Python
object per event) and are returned as pandas DataFrames.  docs/python.md.
"""
import numbers
import os

from . import _lib

LAYERS = ("reserved", "allocated", "pinned")
SITE_COLUMNS = ["label", "stack", "kind", "device", "peak", "peak_t_ns", "count", "bytes",
                "live_at_end", "live_count_at_end", "frames"]
ALL_SITES = 100000             # "all the sites" for summary(top=): a bound, not a cost


def _frame(cols):
    import pandas as pd
    return pd.DataFrame(cols, copy=False)


def _at_text(t):
    """A moment as the C library reads it: "peak", "oom", "end", an int
    (ns since the recorder's t0), a float (seconds) or a time string."""
    if isinstance(t, str):
        return t
    if isinstance(t, bool):
        raise TypeError("state_at: a moment is peak, oom, end, ns (int) or seconds (float)")
    if isinstance(t, int):
        if t < 0:
            raise ValueError("state_at: a negative time")
        return "%dns" % t
    if isinstance(t, float):
        if t < 0:
            raise ValueError("state_at: a negative time")
        return "%dns" % round(t * 1e9)
    raise TypeError("state_at: a moment is peak, oom, end, ns (int) or seconds (float), "
                    "not %s" % type(t).__name__)


class Snapshot:
    """A memsnap snapshot file (plain or zstd).  Nothing is read until a
    method asks; each method reads the file once and keeps its answer."""

    def __init__(self, path):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise FileNotFoundError(2, "No such file or directory", self.path)
        self._summary = {}

    def __repr__(self):
        return "memsnap.Snapshot(%r)" % self.path

    def summary(self, top=10, marks=False, category_rules=None):
        """The dict that `memsnap summary --json [--top N] [--marks]` prints
        for this file: header, events by action and API, per-device levels,
        OOMs, top sites per layer, findings, categories.  category_rules: a
        rules file (docs/cli.md), default $MEMSNAP_CATEGORY_RULES as the
        command."""
        if isinstance(top, bool) or not isinstance(top, numbers.Integral) or \
                not 0 <= top <= 1000000:
            raise ValueError("top: a count from 0 to 1000000 (memsnap summary --top), "
                             "got %r" % (top,))
        if category_rules is None:
            category_rules = os.environ.get("MEMSNAP_CATEGORY_RULES") or None
        top = int(top)
        key = (top, bool(marks), category_rules)
        if key not in self._summary:
            self._summary[key] = _lib.summary_json(self.path, int(top), marks, category_rules)[0]
        return self._summary[key]

    def events(self):
        """A DataFrame with one row per event, in file order: action, t_ns,
        device, addr, size, stream, stack, api, tid, aux, aux2, result, seq as
        the file has them (docs/format.md; action and api categorical), and
        freed (bytes of live memory the event removed), reserved and
        allocated (the process's levels after the event)."""
        with _lib.Result(self.path, _lib.MPY_EVENTS) as r:
            return _frame(r.table("events"))

    def sites(self, layer=None):
        """Allocation sites of one layer (reserved, allocated or pinned;
        default: allocated when the file has allocator blocks, else
        reserved), as `memsnap summary` ranks them, largest peak first, all
        of them (up to 100,000): label, stack, kind, device, peak,
        peak_t_ns, count, bytes (allocated in total; the JSON's
        bytes_total), live_at_end, live_count_at_end, whatever else the
        summary says of a site, and frames (a tuple of "function
        (file:line)", innermost first).  The rows are the summary's top
        sites (summary(top=N)["top_sites"][layer] is sites(layer).head(N)):
        one definition of a site and its label, the analysis library's."""
        import pandas as pd
        if layer is not None and layer not in LAYERS:
            raise ValueError("sites: layer is one of %s, not %r" % (", ".join(LAYERS), layer))
        summ = self.summary(top=ALL_SITES)
        if layer is None:
            layer = "allocated" if summ["allocated_seen"] else "reserved"
        rows = summ["top_sites"].get(layer) or []
        df = pd.DataFrame(rows, columns=None if rows else SITE_COLUMNS)
        df = df.rename(columns={"bytes_total": "bytes"})
        if len(df):
            df["frames"] = [tuple(f) for f in df["frames"]]
            df["kind"] = df["kind"].astype("category")
        first = [c for c in SITE_COLUMNS if c in df.columns and c != "frames"]
        return df[first + [c for c in df.columns if c not in first and c != "frames"] +
                  ["frames"]]

    def categories(self):
        """What the memory was for, per device (summary's "categories", the
        breakdown's rules over each allocation's frames): one row per
        device and category with the device's columns (device, layer,
        total_peak, ...) and the category's (category, peak, at_total_peak,
        at_oom)."""
        import pandas as pd
        rows = []
        for dev in self.summary().get("categories") or []:
            base = {k: v for k, v in dev.items() if k != "items"}
            for item in dev.get("items") or []:
                row = dict(base)
                row.update(item)
                rows.append(row)
        return pd.DataFrame(rows)

    def state_at(self, t):
        """The live objects (allocator blocks, driver allocations, VMM
        objects) after the last event at or before moment t: ns since the
        recorder's t0 (int), seconds (float), a time string ("12.5s",
        "800ms"), "peak" (of the allocated layer, reserved without blocks),
        "oom" (the first OOM) or "end".  Columns: addr, size, t_ns (when it
        was made), device, stream, stack, kind, layer, label, aux.  The
        moment is in .attrs: at, event_index, t_ns."""
        at = _at_text(t)
        with _lib.Result(self.path, _lib.MPY_STATE, at) as r:
            info = r.info()["at"]
            if not info["found"]:
                raise ValueError("%s: no OOM event in the snapshot" % self.path)
            df = _frame(r.table("state"))
        df.attrs.update(at=at, event_index=info["event_index"], t_ns=info["t_ns"])
        return df


def load(path):
    """Opens a memsnap snapshot (.msnap, plain or zstd) for reading."""
    return Snapshot(path)
