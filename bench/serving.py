"""What the serving benches share: running cannprof, a `cannprof serve` on
loopback started and stopped, `cannprof load` against it, and a median
[min..max] as text."""
import json
import os
import signal
import statistics
import subprocess
import sys
import time

NAME = os.path.basename(sys.argv[0]).removesuffix(".py")


def cli(args, binary):
    p = subprocess.run([binary, *args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{NAME}: {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


def serve(binary, model, extra, tmp, threads=1):
    """Start `cannprof serve MODEL --port 0 -t THREADS EXTRA...`; (process, port)."""
    ready = os.path.join(tmp, "port")
    if os.path.exists(ready):
        os.remove(ready)
    srv = subprocess.Popen([binary, "serve", model, "--port", "0", "--ready-file", ready,
                            "-t", str(threads), *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(3000):
        if os.path.exists(ready) or srv.poll() is not None:
            break
        time.sleep(0.01)
    if not os.path.exists(ready):
        srv.kill()
        sys.exit(f"{NAME}: the server did not start: {srv.stderr.read().strip()}")
    return srv, int(open(ready).read())


def stop(srv):
    """SIGTERM; its exit status, stdout and stderr."""
    srv.send_signal(signal.SIGTERM)
    out, err = srv.communicate()
    return srv.returncode, out, err


def load(binary, port, rate, duration):
    """`cannprof load` at `rate` for `duration` seconds, its JSON."""
    return json.loads(cli(["load", f"http://127.0.0.1:{port}", "--rate", str(rate),
                           "--duration", f"{duration}s", "--concurrency", "64", "--json"],
                          binary))


def fmt(v, digits=1):
    return f"{statistics.median(v):.{digits}f} [{min(v):.{digits}f}..{max(v):.{digits}f}]"
