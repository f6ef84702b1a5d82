# Checks the Python frames of a plain-JSON memsnap snapshot (the tests of
# pycases.sh).  usage: pycheck.py SNAP CHECK...   with CHECK one of
#   frames:ACTION:SIZE:F1|F2|...   the ACTION event of SIZE bytes has Python
#       frames, and its Python frames begin (innermost first) with F1, F2, ...
#       each FN@FILE@TEXT: function, file base name, and a text that the
#       named line of that file must contain; there are native frames both
#       before the first Python frame and after the last one (the Python
#       frames stand where the eval loop ran)
#   native:ACTION:SIZE             that event has native frames only
#   none                           no stack of the file has a Python frame
#   tids:N                         Python frames were seen on N threads
#   events:N                       the file has N alloc/free events
#   churn:N[:gil]                  the alloc of (i+1)*4096 bytes has the frame
#                                  churn_i and no other churn_ frame, i < N;
#                                  with gil, the ones made without the GIL
#                                  (i % 3 != 0) may have native frames only
#   wide:N:DEPTH                   pyalloc.py wide's allocations from a stack of
#                                  N functions (3 with the GIL, 3 without): the
#                                  Python frames, innermost first, are the
#                                  whole chain down to main, cut at DEPTH
# Exits 0 when every check holds, else 1 with one line per failure.
import json
import sys

PY = 1 << 63


def load(path):
    syms, stacks, events = {}, {}, []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            t = r.get("type")
            if t == "sym":
                syms[int(r["ip"], 16)] = r
            elif t == "stack":
                stacks[r["id"]] = [int(ip, 16) for ip in r["ips"]]
            elif "a" in r:
                events.append(r)
    return syms, stacks, events


def line_text(path, n):
    try:
        with open(path) as f:
            return f.read().splitlines()[n - 1]
    except (OSError, IndexError):
        return ""


def size_of(e):
    n = e.get("n", 0)
    return int(n, 16) if isinstance(n, str) else n


def main():
    syms, stacks, events = load(sys.argv[1])
    failures = []

    def find(action, size):
        for e in events:
            if e.get("a") == action and size_of(e) == size:
                return e
        failures.append(f"no {action} event of {size} bytes")
        return None

    for check in sys.argv[2:]:
        kind, _, rest = check.partition(":")
        if kind == "frames":
            action, size, want = rest.split(":", 2)
            e = find(action, int(size))
            if not e:
                continue
            ips = stacks.get(e.get("k"), [])
            pos = [i for i, ip in enumerate(ips) if ip & PY]
            if not pos:
                failures.append(f"{check}: no Python frame")
                continue
            if pos[0] == 0 or pos[-1] == len(ips) - 1:
                failures.append(f"{check}: Python frames not between native frames")
            got = [syms.get(ips[i], {}) for i in pos]
            for k, w in enumerate(want.split("|")):
                fn, file, text = w.split("@")
                if k >= len(got):
                    failures.append(f"{check}: only {len(got)} Python frames")
                    break
                s = got[k]
                where = f"{s.get('fn')}@{s.get('file')}:{s.get('line')}"
                if s.get("fn") != fn or not s.get("file", "").endswith("/" + file):
                    failures.append(f"{check}: frame {k} is {where}, expected {fn}@{file}")
                elif text not in line_text(s["file"], s.get("line", 0)):
                    failures.append(f"{check}: frame {k} line {s.get('line')} lacks '{text}'")
        elif kind == "native":
            action, size = rest.split(":")
            e = find(action, int(size))
            if e:
                ips = stacks.get(e.get("k"), [])
                if not ips or any(ip & PY for ip in ips):
                    failures.append(f"{check}: {len(ips)} frames, Python ones among them")
        elif kind == "none":
            if any(ip & PY for ips in stacks.values() for ip in ips):
                failures.append("a stack holds Python frames")
        elif kind == "tids":
            tids = {e.get("th") for e in events
                    if any(ip & PY for ip in stacks.get(e.get("k"), []))}
            if len(tids) != int(rest):
                failures.append(f"Python frames on {len(tids)} threads, expected {rest}")
        elif kind == "events":
            n = sum(1 for e in events if e.get("a") in ("alloc", "free"))
            if n != int(rest):
                failures.append(f"{n} alloc/free events, expected {rest}")
        elif kind == "churn":
            count, _, gil_only = rest.partition(":")
            for i in range(int(count)):
                e = find("alloc", (i + 1) << 12)
                if not e:
                    continue
                names = [syms.get(ip, {}).get("fn", "") for ip in stacks.get(e.get("k"), [])
                         if ip & PY]
                churn = [n for n in names if n.startswith("churn_")]
                if gil_only and i % 3 and not names:
                    continue
                if churn != [f"churn_{i}"]:
                    failures.append(f"alloc {i}: churn frames {churn}, expected churn_{i}")
        elif kind == "wide":
            n, depth = (int(x) for x in rest.split(":"))
            chain = (["level3_alloc", "level2_outer", "level1_entry"] +
                     [f"wide_{i}" for i in reversed(range(n))] + ["main", "<module>"])[:depth]
            for rep in range(3):
                for gil in (1, 0):
                    e = find("alloc", (n << 16) + (rep << 13) + (gil << 12))
                    if not e:
                        continue
                    names = [syms.get(ip, {}).get("fn", "") for ip in stacks.get(e.get("k"), [])
                             if ip & PY]
                    if names != chain:
                        bad = next((k for k, (a, b) in enumerate(zip(names, chain)) if a != b),
                                   min(len(names), len(chain)))
                        failures.append(f"{check}: rep {rep} gil {gil}: {len(names)} Python frames,"
                                        f" frame {bad} is {names[bad:bad + 1]},"
                                        f" expected {chain[bad:bad + 1]} of {len(chain)}")
        else:
            failures.append(f"unknown check {check}")
    # Every Python frame of every stack is named.
    for ips in stacks.values():
        for ip in ips:
            if ip & PY and not syms.get(ip, {}).get("fn"):
                failures.append(f"Python frame {ip:#x} has no named sym line")
    for f in failures:
        print("FAIL:", f)
    print(f"pycheck: {len(sys.argv) - 2} checks, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
