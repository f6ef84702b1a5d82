"""live.http: the metrics endpoint's bounds (analyze/metrics.h), on
`memsnap run --metrics` over climb: GET and HEAD of /metrics (a query
string too) answer 200, another method 405, a request over 8 KiB 431,
garbage 400; 16 connections that send nothing take every slot, and a 17th
is closed at once; once they go, scrapes are answered again; the program
runs on to its end with every event recorded meanwhile."""
import os
import socket
import subprocess
import sys
import time

memsnap, climb = os.environ["MEMSNAP"], os.environ["CLIMB"]
work = sys.argv[1]
os.makedirs(work, exist_ok=True)
fails = []


def check(name, ok, detail=""):
    print("%s %s %s" % ("PASS" if ok else "FAIL", name, detail))
    if not ok:
        fails.append(name)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def ask(port, data, timeout=10):
    """The whole answer to data; what came before an error when there is one."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    got = b""
    try:
        s.sendall(data)
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError as e:
        print("(%r after %d bytes of answer)" % (e, len(got)))
    s.close()
    return got


port = free_port()
snap = os.path.join(work, "h.msnap")
run = subprocess.Popen([memsnap, "run", "-q", "--metrics", "127.0.0.1:%d" % port,
                        "--sim-device", "4G", "-o", snap, "--", climb, "8", "60", "100", "500"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
try:
    for _ in range(300):
        try:
            if b"memsnap_reserved_bytes{" in ask(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"):
                break
        except OSError:
            pass
        time.sleep(0.1)
    r = ask(port, b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    check("GET /metrics?x=1", r.startswith(b"HTTP/1.1 200 OK\r\n") and
          b"Content-Type: text/plain; version=0.0.4" in r and b"memsnap_events_total{" in r)
    r = ask(port, b"HEAD /metrics HTTP/1.0\r\n\r\n")
    check("HEAD /metrics", r.startswith(b"HTTP/1.1 200 OK\r\n") and r.endswith(b"\r\n\r\n"))
    check("GET /", ask(port, b"GET / HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 404 "))
    check("POST /metrics", ask(port, b"POST /metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 "))
    check("a request over 8 KiB",
          ask(port, b"GET /metrics HTTP/1.1\r\nX-Long: " + b"a" * 9000 + b"\r\n\r\n")
          .startswith(b"HTTP/1.1 431 "))
    check("garbage", ask(port, b"\x01\x02\r\n\r\n").startswith(b"HTTP/1.1 400 "))
    time.sleep(1)            # the connections above are gone from the server's slots
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(16)]
    time.sleep(1.5)          # all accepted (the server polls every 250 ms at most)

    def alive(c):
        c.setblocking(False)
        try:
            return c.recv(1) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False
    check("16 idle connections are held", all(alive(c) for c in idle),
          "%d of 16 closed" % sum(not alive(c) for c in idle))
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    what = ""
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
        got = s.recv(100)
        closed = got == b""
        what = "got %r" % got[:40]
    except socket.timeout:
        closed = False       # answered nothing, not closed either
        what = "no answer in 5 s"
    except OSError as e:
        closed = True        # reset
        what = repr(e)
    s.close()
    check("a 17th connection is closed at once", closed, what)
    for c in idle:
        c.close()
    time.sleep(0.5)
    check("answered again after the idle ones went",
          ask(port, b"GET /metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 200 OK"))
    err = run.communicate(timeout=120)[1].decode()
    check("the program ran to its end", run.returncode == 0, err)
    summ = subprocess.run([memsnap, "summary", "--json", snap], stdout=subprocess.PIPE, text=True)
    import json
    j = json.loads(summ.stdout)
    # 60 steps of an allocation kept and a scratch allocated and freed, then
    # the 60 kept ones freed
    check("every event recorded", j["events"]["total"] == 240 and j["trailer"]["events"] == 240,
          "events %s" % j["events"]["total"])
finally:
    if run.poll() is None:
        run.kill()
sys.exit(1 if fails else 0)
