"""memsnap.load(path) -> Snapshot: a snapshot read from Python.

Every answer is one read of the file by memsnap's C analysis library
(libmemsnap_py.so, analyze/pyapi.h): the same read loop, state model, site
labels and summary as the `memsnap` command, so the figures agree with
`memsnap summary`.  Tables come over as numpy arrays built in C (no Python
object per event) and are returned as pandas DataFrames.  docs/python.md.
"""
import copy
import numbers
import os
import warnings

from . import _lib

LAYERS = ("reserved", "allocated", "pinned")
SITE_COLUMNS = ["label", "stack", "kind", "device", "peak", "peak_t_ns", "count", "bytes",
                "live_at_end", "live_count_at_end", "frames"]
ALL_SITES = 100000             # "all the sites" for summary(top=): a bound, not a cost


def _frame(cols):
    _, pd = _lib.numpy_pandas()
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
    method asks.  A read is kept: the first that asks for the summary, the
    sites or the events also takes, in the same read of the file, the
    summary of every site and the live set at the peak, so that
    summary(), sites(), categories(), events() and state_at("peak") read
    the file once between them; each other moment of state_at, and a
    summary with --marks or other category rules, is one more read, kept
    too.  On a terminal a read that takes more than a second draws a
    progress line on stderr (MEMSNAP_NO_PROGRESS=1: none)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise FileNotFoundError(2, "No such file or directory", self.path)
        self._summary = {}           # (top, marks, rules) -> dict
        self._events = None          # the events DataFrame
        self._states = {}            # moment text -> (columns, attrs)
        self._first_t = None         # t_ns of the first event (state_at's warning)

    def __repr__(self):
        return "memsnap.Snapshot(%r)" % self.path

    def _rules(self, category_rules):
        return category_rules if category_rules is not None else \
            (os.environ.get("MEMSNAP_CATEGORY_RULES") or None)

    def _read(self, events=False, at=None):
        """One read of the file for what is asked (the events table, the
        state at moment at) and, while it reads, the summary of every site
        and the state at the peak when they are not kept yet."""
        rules = self._rules(None)
        full = (ALL_SITES, False, rules)
        want = 0
        if events and self._events is None:
            want |= _lib.MPY_EVENTS
        moment = at if at is not None and at not in self._states else None
        if moment is None and "peak" not in self._states and (want or full not in self._summary) \
                and _tables_here():
            moment = "peak"           # kept for state_at("peak"), when it can be a table
        if moment is not None:
            want |= _lib.MPY_STATE
        need_summary = full not in self._summary
        if not want and not need_summary:
            return
        with _lib.Result(self.path, want, moment, summary_top=ALL_SITES if need_summary
                         else None, rules=rules) as r:
            self._first_t = r.info().get("first_t_ns", 0)
            if need_summary:
                self._summary[full] = r.summary
            if want & _lib.MPY_EVENTS:
                self._events = _frame(r.table("events"))
            if want & _lib.MPY_STATE:
                info = r.info()["at"]
                self._states[moment] = (r.table("state") if info["found"] else None,
                                        dict(at=moment, event_index=info["event_index"],
                                             t_ns=info["t_ns"]))

    def summary(self, top=10, marks=False, category_rules=None):
        """The dict that `memsnap summary --json [--top N] [--marks]` prints
        for this file: header, events by action and API, per-device levels,
        OOMs, top sites per layer, what was live at the peak, findings,
        categories.  category_rules: a rules file (docs/cli.md), default
        $MEMSNAP_CATEGORY_RULES as the command.  Without marks and other
        rules it is the kept summary of every site with its lists cut to
        top (the same dict the command prints)."""
        if isinstance(top, bool) or not isinstance(top, numbers.Integral) or \
                not 0 <= top <= 1000000:
            raise ValueError("top: a count from 0 to 1000000 (memsnap summary --top), "
                             "got %r" % (top,))
        rules = self._rules(category_rules)
        top = int(top)
        key = (top, bool(marks), rules)
        if key in self._summary:
            return self._summary[key]
        if not marks and rules == self._rules(None) and top <= ALL_SITES:
            self._read()
            s = copy.deepcopy(self._summary[(ALL_SITES, False, rules)])
            for layer, lst in (s.get("top_sites") or {}).items():
                if isinstance(lst, list):
                    del lst[top:]
            if isinstance(s.get("at_peak"), dict):
                del s["at_peak"]["sites"][top:]
            self._summary[key] = s
            return s
        self._summary[key] = _lib.summary_json(self.path, top, marks, rules)[0]
        return self._summary[key]

    def events(self):
        """A DataFrame with one row per event, in file order: action, t_ns,
        device, addr, size, stream, stack, api, tid, aux, aux2, result, seq as
        the file has them (docs/format.md; action and api categorical), and
        freed (bytes of live memory the event removed), reserved and
        allocated (the process's levels after the event).  Read once and
        kept: every call gives the same DataFrame (copy it to change it)."""
        self._read(events=True)
        return self._events

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
        _, pd = _lib.numpy_pandas()
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
        _, pd = _lib.numpy_pandas()
        rows = []
        for dev in self.summary().get("categories") or []:
            base = {k: v for k, v in dev.items() if k != "items"}
            for item in dev.get("items") or []:
                row = dict(base)
                row.update(item)
                rows.append(row)
        return pd.DataFrame(rows)

    POOL_COLUMNS = ["device", "pool", "torch_id", "kind", "peak_reserved", "peak_allocated",
                    "final_reserved", "final_allocated", "blocks", "segments", "top_sites"]

    def pools(self):
        """PyTorch's memory pools (summary's "pools"): per device the
        default pool and each private pool (a CUDA graph's, one a
        graph_pool_handle() shares, a torch.cuda.MemPool), one row each:
        device, pool (its id as the file names it), torch_id (PyTorch's
        MempoolId_t as a tuple, None where the file does not say), kind
        (default, graph or mempool), peak_reserved, peak_allocated,
        final_reserved, final_allocated (reserved None where the file does
        not name the pool's segments, before format 1.3), blocks, segments,
        top_sites (a tuple of (label, peak bytes)).  Empty for a file
        without PyTorch's blocks."""
        _, pd = _lib.numpy_pandas()
        rows = []
        for p in self.summary().get("pools") or []:
            row = dict(p)
            tid = row.get("torch_id")
            row["torch_id"] = tuple(tid) if tid is not None else None
            row["top_sites"] = tuple((t["label"], t["peak"]) for t in row.get("top_sites") or [])
            rows.append(row)
        df = pd.DataFrame(rows, columns=None if rows else self.POOL_COLUMNS)
        if len(df):
            df["kind"] = df["kind"].astype("category")
        return df[[c for c in self.POOL_COLUMNS if c in df.columns]]

    def state_at(self, t):
        """The live objects (allocator blocks, driver allocations, VMM
        objects) after the last event at or before moment t: ns since the
        recorder's t0 (int), seconds (float), a time string ("12.5s",
        "800ms"), "peak" (of the allocated layer, reserved without blocks),
        "oom" (the first OOM) or "end".  Columns: addr, size, t_ns (when it
        was made), device, stream, stack, kind, layer, label, aux.  The
        moment is in .attrs: at, event_index, t_ns.  A moment before the
        first event (an int is nanoseconds: state_at(15) is 15 ns, not 15
        s) gives no objects, with a warning that says so."""
        at = _at_text(t)
        self._read(at=at)
        cols, attrs = self._states[at]
        if cols is None:
            raise ValueError("%s: no OOM event in the snapshot" % self.path)
        df = _frame({k: v for k, v in cols.items()})
        df.attrs.update(attrs)
        if attrs["event_index"] == 0 and at not in ("peak", "oom", "end"):
            first = self._first_event_t()
            if first is not None:
                warnings.warn("memsnap: state_at(%r) is %s, before the first event (at %s): "
                              "nothing was recorded yet%s" % (
                                  t, _fmt_ns(_ns_of(at)), _fmt_ns(first),
                                  "; an int is nanoseconds, a float seconds "
                                  "(state_at(%r.0) is %r s)" % (t, t)
                                  if isinstance(t, int) and not isinstance(t, bool) else ""),
                              UserWarning, stacklevel=2)
        return df

    def _first_event_t(self):
        """t_ns of the first event (any read knows it), None without events."""
        if self._first_t is None:
            self._read()
        return self._first_t or None


def _tables_here():
    """Whether numpy and pandas are here for the tables (summary() needs none)."""
    try:
        _lib.numpy_pandas()
        return True
    except ImportError:
        return False


def _ns_of(at):
    """ns of a moment text "Nns" (what _at_text makes of a number)."""
    return int(at[:-2]) if at.endswith("ns") and at[:-2].isdigit() else None


def _fmt_ns(ns):
    if ns is None:
        return "?"
    for unit, div in (("s", 10 ** 9), ("ms", 10 ** 6), ("us", 10 ** 3)):
        if ns >= div:
            return "%.3f %s" % (ns / div, unit)
    return "%d ns" % ns


def load(path):
    """Opens a memsnap snapshot (.msnap, plain or zstd) for reading."""
    return Snapshot(path)
