"""memsnap.record(..., metrics=PORT): the recording's Prometheus metrics
served in-process from a thread of its own (analyze/metrics.h through
libmemsnap_py.so), with the recorder tests' fake PyTorch (test_record.py
says how it stands in): the allocated bytes served equal what the fake
allocator holds, the site is named by this file's line, the rank label is
$RANK, another path is 404, and a taken port or a bad address is refused
before anything records."""
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import memsnap
from memsnap import _record
from test_record import fake_torch, needs_fake


def line_of(text):
    with open(__file__) as f:
        return [i for i, l in enumerate(f, 1) if text in l and "line_of" not in l][0]


def scrape(addr, path="/metrics"):
    with urllib.request.urlopen("http://%s%s" % (addr, path), timeout=5) as r:
        return r.read().decode()


def value(text, name):
    """The value of the one series of name (None when it has none)."""
    rows = [l for l in text.splitlines() if l.startswith(name + "{")]
    assert len(rows) <= 1, rows
    return int(rows[0].rsplit(" ", 1)[1]) if rows else None


def wait_until(addr, name, want, timeout=15):
    text = ""
    end = time.time() + timeout
    while time.time() < end:
        text = scrape(addr)
        if value(text, name) == want:
            return text
        time.sleep(0.2)
    raise AssertionError("%s never reached %s:\n%s" % (name, want, text))


@needs_fake
def test_metrics_follow_the_recording(tmp_path, monkeypatch):
    c10 = fake_torch()
    monkeypatch.setenv("RANK", "3")
    path = tmp_path / "live.msnap"
    with memsnap.record(path, metrics=0) as r:
        addr = r.metrics_address
        assert addr.startswith("127.0.0.1:") and not addr.endswith(":0")
        held = [c10.fake_c10_malloc(4 << 20) for _ in range(3)]   # the site
        text = wait_until(addr, "memsnap_allocated_bytes", 12 << 20)
        assert 'rank="3"' in text and 'pid="%d"' % os.getpid() in text
        assert value(text, "memsnap_peak_allocated_bytes") == 12 << 20
        # in-process there is no driver level: reserved is not known, and is
        # left out rather than served as 0 (on the H200 it read 0 while
        # PyTorch held 2.1 GB)
        assert value(text, "memsnap_reserved_bytes") is None, text
        assert value(text, "memsnap_peak_reserved_bytes") is None, text
        assert "# TYPE memsnap_reserved_bytes gauge" in text
        sites = [l for l in text.splitlines() if l.startswith("memsnap_site_live_bytes{")]
        want = "test_live_metrics.py:%d" % line_of("fake_c10_malloc(4 << 20) for _")
        assert any(want in l and l.endswith(" %d" % (12 << 20)) for l in sites), sites
        for p in held:
            c10.fake_c10_free(p, 4 << 20)
        wait_until(addr, "memsnap_allocated_bytes", 0)
        with pytest.raises(urllib.error.HTTPError) as e:
            scrape(addr, "/")
        assert e.value.code == 404
        if subprocess.run(["sh", "-c", "command -v promtool"], stdout=subprocess.PIPE).returncode == 0:
            p = subprocess.run(["promtool", "check", "metrics"], input=scrape(addr).encode(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            assert p.returncode == 0, p.stdout.decode()
    assert r.metrics_address is None                        # served while it ran
    with pytest.raises(OSError):
        scrape(addr)


def test_a_taken_port_is_refused(tmp_path):
    if not memsnap.paths()["recorder"]:
        pytest.skip("no recorder")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        with pytest.raises(_record.RecordError, match="port %d on 127.0.0.1 is taken" % port):
            memsnap.record(tmp_path / "a.msnap", torch=False, metrics=port).start()
        assert not (tmp_path / "a.msnap").exists()         # nothing was recorded
        with pytest.raises(_record.RecordError, match="bad address"):
            memsnap.record(tmp_path / "b.msnap", torch=False, metrics="1.2.3:80").start()
        with pytest.raises(_record.RecordError, match="metrics wants a port"):
            memsnap.record(tmp_path / "c.msnap", torch=False, metrics=True).start()
        assert not list(tmp_path.iterdir())
    finally:
        s.close()
