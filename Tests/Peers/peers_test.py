#!/usr/bin/env python3
"""loopd against real peers, as users run them.

Third-party StatsD clients from PyPI (`statsd`, and `datadog`'s DogStatsD client for tags)
send to loopd over UDP and TCP; a Graphite carbon-cache from Debian (`graphite-carbon`)
receives loopd's flushes and a Prometheus server from Debian (`prometheus`) scrapes its
endpoint. Each total is checked in loopd's JSON output and through the peer's own storage
(carbon's whisper files) or query API (Prometheus' /api/v1/query). Everything listens on
127.0.0.1 and every wait is bounded.

Usage: peers_test.py PATH/TO/loopd    (scripts/peer-tests builds loopd and installs the peers)
"""
import json, os, signal, socket, subprocess, sys, tempfile, time, urllib.error, urllib.parse, urllib.request

import statsd
from datadog.dogstatsd import DogStatsd


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_loopd_port():
    """A port free for UDP and TCP alike, as loopd listens on both (a port free for UDP alone
    can be a TCP listener's, or the local port of a connection, such as a scrape's)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp, \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            tcp.bind(("127.0.0.1", 0))
            port = tcp.getsockname()[1]
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no port free for both UDP and TCP")


def wait_for(what, check, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def totals(path):
    counters, gauges, timers, sets = {}, {}, {}, {}
    if not os.path.exists(path):
        return counters, gauges, timers, sets
    with open(path) as f:
        for line in f:
            flush = json.loads(line)
            for s in flush["counters"]:
                key = (s["name"], tuple(s["tags"]))
                counters[key] = counters.get(key, 0) + s["value"]
            for s in flush["gauges"]:
                gauges[(s["name"], tuple(s["tags"]))] = s["value"]
            for s in flush["timers"]:
                key = (s["name"], tuple(s["tags"]))
                count, total = timers.get(key, (0, 0))
                timers[key] = (count + s["count"], total + s["sum"])
            for s in flush["sets"]:
                key = (s["name"], tuple(s["tags"]))
                sets[key] = max(sets.get(key, 0), s["count"])
    return counters, gauges, timers, sets


def main(loopd_binary):
    work = tempfile.mkdtemp(prefix="loopd-peers-")
    processes = []

    def start(args, name):
        log = open(os.path.join(work, name + ".log"), "w")
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        processes.append(process)
        return process

    try:
        # carbon-cache: plaintext receiver on a free loopback port, one point per second.
        carbon_port = free_port()
        os.makedirs(os.path.join(work, "whisper"))
        with open(os.path.join(work, "carbon.conf"), "w") as f:
            f.write(f"""[cache]
STORAGE_DIR = {work}
LOCAL_DATA_DIR = {work}/whisper
WHITELISTS_DIR = {work}/lists
CONF_DIR = {work}
LOG_DIR = {work}/carbon-log
PID_DIR = {work}
ENABLE_LOGROTATION = False
USER =
MAX_CACHE_SIZE = inf
MAX_UPDATES_PER_SECOND = 100000
MAX_CREATES_PER_MINUTE = inf
LINE_RECEIVER_INTERFACE = 127.0.0.1
LINE_RECEIVER_PORT = {carbon_port}
ENABLE_UDP_LISTENER = False
PICKLE_RECEIVER_INTERFACE = 127.0.0.1
PICKLE_RECEIVER_PORT = {free_port()}
CACHE_QUERY_INTERFACE = 127.0.0.1
CACHE_QUERY_PORT = {free_port()}
WHISPER_AUTOFLUSH = True
ENABLE_TAGS = False
""")
        with open(os.path.join(work, "storage-schemas.conf"), "w") as f:
            f.write("[all]\npattern = .*\nretentions = 1s:1h\n")
        start(["carbon-cache", f"--config={work}/carbon.conf", "--nodaemon", "start"], "carbon")
        wait_for("carbon-cache to listen", lambda: port_open(carbon_port))

        # loopd, flushing every 2 s (whisper keeps one point per second: flushes never share one).
        loopd_port = free_loopd_port()
        exporter_port = free_port()
        output = os.path.join(work, "flushes.jsonl")
        # One mapping rule: the stream client's histogram gets buckets of its own.
        with open(os.path.join(work, "loopd.yaml"), "w") as f:
            f.write("mappings:\n  - match: peer.uss.hist\n    buckets: [2.5, 5]\n")
        loopd = start([loopd_binary, "--config", os.path.join(work, "loopd.yaml"),
                       "--port", str(loopd_port), "--flush-interval", "2", "--output", output,
                       "--graphite", f"localhost:{carbon_port}", "--prometheus", f"127.0.0.1:{exporter_port}",
                       "--unix-socket", os.path.join(work, "dsd.sock"),
                       "--unix-stream", os.path.join(work, "dsd-stream.sock")],
                      "loopd")
        try:
            wait_for("loopd to listen", lambda: port_open(loopd_port) and port_open(exporter_port))
        except AssertionError:
            status = loopd.poll()
            raise AssertionError(f"loopd is not listening (exit status {status}):\n"
                                 + open(os.path.join(work, "loopd.log")).read())

        # Prometheus scraping loopd every second.
        prometheus_port = free_port()
        with open(os.path.join(work, "prometheus.yml"), "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
scrape_configs:
  - job_name: loopd
    static_configs:
      - targets: ["127.0.0.1:{exporter_port}"]
""")
        start(["prometheus", f"--config.file={work}/prometheus.yml", f"--storage.tsdb.path={work}/tsdb",
               f"--web.listen-address=127.0.0.1:{prometheus_port}"], "prometheus")
        wait_for("prometheus to listen", lambda: port_open(prometheus_port))

        # The clients, as their users call them.
        client = statsd.StatsClient("127.0.0.1", loopd_port, prefix="peer")
        for _ in range(500):
            client.incr("counter")
        for value in range(100):
            client.timing("timer", value)
        client.gauge("gauge", 40)
        client.gauge("gauge", 2, delta=True)
        for user in ["ann", "bob", "cid", "ann"]:
            client.set("users", user)
        with client.pipeline() as pipe:  # several metrics per datagram
            for _ in range(50):
                pipe.incr("piped")
        tcp = statsd.TCPStatsClient("127.0.0.1", loopd_port, prefix="peer")
        for _ in range(100):
            tcp.incr("tcp")
        tcp.close()
        dog = DogStatsd(host="127.0.0.1", port=loopd_port, disable_telemetry=True, disable_buffering=False)
        for i in range(300):
            dog.increment("peer.dd.counter", tags=["zone:b", "env:peer"])
            dog.histogram("peer.dd.hist", i % 10, tags=["env:peer"])
            dog.distribution("peer.dd.dist", 3, tags=["env:peer"])
        dog.gauge("peer.dd.gauge", 7, tags=["env:peer"])
        dog.set("peer.dd.set", "x", tags=["env:peer"])
        # An event and a service check, as the client writes them (lengths, escaped line feeds,
        # "m:" escaped in the message).
        dog.event("Deploy | web", "v1.2\nrolled out", alert_type="success", tags=["env:peer"], hostname="web-1",
                  date_happened=1700000000)
        dog.service_check("peer.db", DogStatsd.CRITICAL, tags=["env:peer"], message="down m: since 10:00")
        dog.flush()
        # The datagram client over the Unix socket (its socket_path mode), as Datadog recommends
        # for high volume on one host.
        uds = DogStatsd(socket_path=os.path.join(work, "dsd.sock"), disable_telemetry=True, disable_buffering=False)
        for _ in range(200):
            uds.increment("peer.uds.counter", tags=["via:uds"])
        uds.flush()
        # The same client in its stream mode (unixstream://): length-prefixed payloads on a Unix
        # stream socket, as it sends to a DogStatsD agent configured with a stream socket.
        stream = DogStatsd(socket_path="unixstream://" + os.path.join(work, "dsd-stream.sock"),
                           disable_telemetry=True, disable_buffering=False)
        for i in range(300):
            stream.increment("peer.uss.counter", tags=["via:stream"])
            stream.histogram("peer.uss.hist", i % 7, tags=["via:stream"])
        stream.flush()
        stream.close_socket()
        # A plain line client on the stream socket, as with `nc -U`.
        lines = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lines.connect(os.path.join(work, "dsd-stream.sock"))
        lines.sendall(b"peer.uss.lines:1|c\n" * 40)
        lines.close()
        # Sampled timers (every sample is 10 ms, sent at rate 0.5) and a counter sent negative
        # increments, as raw datagrams: the clients drop sampled sends at random.
        raw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(20):
            raw.sendto(b"peer.sampled:10|ms|@0.5\npeer.neg:5|c\npeer.neg:-3|c", ("127.0.0.1", loopd_port))
        sent_lines = 500 + 100 + 2 + 4 + 50 + 100 + 900 + 2 + 2 + 200 + 600 + 40 + 60

        def all_lines_in():
            counters = totals(output)[0]
            return counters.get(("loopd.lines_received", ()), 0) >= sent_lines
        wait_for(f"loopd to receive {sent_lines} lines", all_lines_in)

        # loopd's own totals.
        counters, gauges, timers, sets = totals(output)
        expect = {
            "counter": (counters.get(("peer.counter", ())), 500),
            "piped": (counters.get(("peer.piped", ())), 50),
            "tcp": (counters.get(("peer.tcp", ())), 100),
            "dd.counter": (counters.get(("peer.dd.counter", ("env:peer", "zone:b"))), 300),
            "uds counter": (counters.get(("peer.uds.counter", ("via:uds",))), 200),
            "unix stream counter": (counters.get(("peer.uss.counter", ("via:stream",))), 300),
            "unix stream hist sum": (timers.get(("peer.uss.hist", ("via:stream",)), (0, 0))[1],
                                     sum(i % 7 for i in range(300))),
            "unix stream lines": (counters.get(("peer.uss.lines", ())), 40),
            "timer count": (timers.get(("peer.timer", ()), (0, 0))[0], 100),
            "timer sum": (timers.get(("peer.timer", ()), (0, 0))[1], sum(range(100))),
            "dd.hist count": (timers.get(("peer.dd.hist", ("env:peer",)), (0, 0))[0], 300),
            "dd.dist sum": (timers.get(("peer.dd.dist", ("env:peer",)), (0, 0))[1], 900),
            "gauge": (gauges.get(("peer.gauge", ())), 42),
            "dd.gauge": (gauges.get(("peer.dd.gauge", ("env:peer",))), 7),
            "users": (sets.get(("peer.users", ())), 3),
            "bad lines": (counters.get(("loopd.bad_lines", ())), 0),
        }
        failures = [f"loopd {k}: got {got}, expected {want}" for k, (got, want) in expect.items() if got != want]
        flushes = [json.loads(line) for line in open(output)]
        events = [e for flush in flushes for e in flush["events"]]
        checks = [c for flush in flushes for c in flush["service_checks"]]
        want_event = {"title": "Deploy | web", "text": "v1.2\nrolled out", "timestamp": 1700000000,
                      "hostname": "web-1", "alert_type": "success", "tags": ["env:peer"]}
        want_check = {"name": "peer.db", "status": 2, "tags": ["env:peer"], "message": "down m: since 10:00"}
        if events != [want_event]:
            failures.append(f"loopd events: got {events}, expected [{want_event}]")
        if checks != [want_check]:
            failures.append(f"loopd service checks: got {checks}, expected [{want_check}]")
        if counters.get(("loopd.events_received", ())) != 1 or counters.get(("loopd.service_checks_received", ())) != 1:
            failures.append("loopd.events_received and loopd.service_checks_received: expected 1 each")

        # carbon-cache's whisper files: the counter's points add up to what was sent.
        def whisper_sum(path):
            file = os.path.join(work, "whisper", *path.split(".")) + ".wsp"
            if not os.path.exists(file):
                return None
            fetched = subprocess.run(["whisper-fetch", "--json", "--from=0", file], capture_output=True, text=True)
            points = json.loads(fetched.stdout)["values"]
            return sum(p for p in points if p is not None)
        for path, want in [("peer.counter", 500), ("peer.tcp", 100), ("peer.timer.count", 100), ("peer.gauge", None)]:
            got = wait_for(f"carbon to store {path}",
                           lambda: (lambda s: s if s is not None and (want is None or s >= want) else None)(whisper_sum(path)),
                           seconds=30)
            if want is not None and got != want:
                failures.append(f"carbon {path}: points sum to {got}, expected {want}")

        # Prometheus' query API: cumulative counters, summaries' counts.
        def query(expression):
            url = f"http://127.0.0.1:{prometheus_port}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    result = json.load(response)["data"]["result"]
            except urllib.error.HTTPError as error:
                raise AssertionError(f"prometheus refused {expression}: {error.read().decode()}")
            return float(result[0]["value"][1]) if result else None
        # Names as docs/loopd.md gives them: "counter" is a type word, which Prometheus' linter
        # refuses after a "_", so it is joined to the word before it.
        for expression, want in [("peercounter_total", 500), ('peer_ddcounter_total{env="peer",zone="b"}', 300),
                                 ("peer_timer_seconds_count", 100), ('peer_dd_hist_count{env="peer"}', 300),
                                 ('peer_dd_hist_bucket{env="peer",le="5"}', 180), ("peergauge", 42),
                                 ("peer_timer_seconds_sum", sum(range(100)) / 1000),
                                 ("peer_sampled_seconds_count", 40),
                                 ("peer_sampled_seconds_sum / peer_sampled_seconds_count", 0.01),
                                 ("peer_neg_total", 100),
                                 # The rule's buckets: 0 to 6, 300 times; 129 at or below 2.5.
                                 ('peer_uss_hist_bucket{via="stream",le="2.5"}', 129),
                                 ('peer_uss_hist_bucket{via="stream",le="5"}', 258),
                                 ('count(peer_uss_hist_bucket{via="stream"})', 3)]:
            got = wait_for(f"prometheus to report {expression} = {want}",
                           lambda: query(expression) == want or None, seconds=30) and want
            if got != want:
                failures.append(f"prometheus {expression}: got {query(expression)}, expected {want}")

        # Over the whole run: every scrape succeeded, and no counter went down.
        for expression, want in [("min_over_time(up[5m])", 1), ("resets(peer_neg_total[5m])", 0),
                                 ("resets(peercounter_total[5m])", 0), ("resets(peer_sampled_seconds_count[5m])", 0),
                                 ("resets(peer_sampled_seconds_sum[5m])", 0)]:
            got = query(expression)
            if got != want:
                failures.append(f"prometheus {expression}: got {got}, expected {want}")

        # Hostile names: carbon stores each under the path docs/loopd.md gives, inside its
        # whisper directory, one file per series.
        graphite_names = {b"evil/../../path\\x": "evil-/-/-path_x", b"dots..in...name.": "dots/in/name",
                          b"glob*?[x]{y}": "glob___x__y_", "ünï.cödé".encode(): "__n__/c__d__",
                          b"semi;colon=x": "semi_colon_x"}
        def fnv1a(data):
            value = 2166136261
            for byte in data:
                value = ((value ^ byte) * 16777619) & 0xffffffff
            return value
        long_node = b"x" * 300  # too long for a file name: cut, with a hash of the whole node
        graphite_names[b"long." + long_node] = "long/" + "x" * 191 + "_%08x" % fnv1a(long_node)
        for name in graphite_names:
            raw.sendto(name + b":1|c", ("127.0.0.1", loopd_port))
        for name, path in graphite_names.items():
            got = wait_for(f"carbon to store {path}", lambda: whisper_sum(path.replace("/", ".")), seconds=30)
            if got != 1:
                failures.append(f"carbon {name}: {path}.wsp sums to {got}, expected 1")
        stored = sorted(os.path.relpath(os.path.join(d, f), os.path.join(work, "whisper"))
                        for d, _, files in os.walk(os.path.join(work, "whisper")) for f in files)
        if any(path.startswith("..") or ";" in path or "*" in path for path in stored):
            failures.append(f"carbon stored a path it should not have: {stored}")

        # Hostile names and tags: the exposition still passes promtool's checks, lint included.
        hostile = [b"a.b.c:1|c", b"a_b_c:2|c", b"a-b-c:3|c", b"lat:10|ms|@0.5", b"lat:5|h", b"lat:5|d",
                   b"my-key:1|c|#my-key:v,my.key:w", b"fooBar.latencyMs:3|ms", b"disk.used.kb:5|g",
                   b"req.total:4|g", b"x.count:1|g", b"h:1|c|#__name__:x,le:1,quantile:2,podName:p,1a:b",
                   b"_ms:1|g", b"9lives:1|c", b"my_counter:1|c", b"weird/path\\x:1|g", b"q\"uote:1|c|#v:\"\\\n",
                   "ünï.cödé:1|g|#ключ:значение".encode(), b"x_k_b:1|g", b"api:1|c|#a:1,a:2",
                   b"kilo.bits:1|g", b"minutes:1|c", b"total:1|c", b"_count:1|g", b"__bucket:1|h"]
        for line in hostile:
            raw.sendto(line, ("127.0.0.1", loopd_port))
        time.sleep(2.5)  # a flush
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter_port}/metrics", timeout=5) as response:
            exposition = response.read()
        checked = subprocess.run(["promtool", "check", "metrics"], input=exposition, capture_output=True)
        if (checked.returncode != 0 or b"\n# TYPE foo_bar_latency_seconds histogram\n" not in exposition
                or b"\nh_total{" not in exposition):
            failures.append(f"promtool check metrics: status {checked.returncode}: "
                            f"{checked.stdout.decode()}{checked.stderr.decode()}")

        # SIGTERM: a final flush and exit 0 within a second.
        started = time.time()
        loopd.send_signal(signal.SIGTERM)
        status = loopd.wait(timeout=10)
        elapsed = time.time() - started
        if status != 0 or elapsed > 1:
            failures.append(f"loopd exit on SIGTERM: status {status} after {elapsed:.2f} s (expected 0 within 1 s)")

        # etsy's Graphite layout, with a config file (a mapping rule, a global prefix and tag),
        # as a user replacing etsy StatsD runs it: the PyPI statsd client sends, carbon's whisper
        # files must hold the paths etsy's dashboards read.
        config = os.path.join(work, "loopd.yaml")
        with open(config, "w") as f:
            f.write("graphite-layout: etsy\nprefix: app\nmappings:\n"
                    "  - match: legacy.*.hits\n    name: hits.$1\n")
        etsy_port = free_loopd_port()
        etsy = start([loopd_binary, "--config", config, "--port", str(etsy_port), "--flush-interval", "2",
                      "--output", os.path.join(work, "etsy.jsonl"), "--graphite", f"127.0.0.1:{carbon_port}"],
                     "loopd-etsy")
        wait_for("loopd (etsy layout) to listen", lambda: port_open(etsy_port) or etsy.poll() is not None)
        if etsy.poll() is not None:
            raise AssertionError(f"loopd (etsy layout) exited with {etsy.poll()}: "
                                 + open(os.path.join(work, "loopd-etsy.log")).read()[-2000:])
        client = statsd.StatsClient("127.0.0.1", etsy_port)
        for _ in range(10):
            client.incr("legacy.web.hits")
        client.gauge("etsy.level", 7)
        # One line, so that one flush holds every sample: 1..10 ms.
        raw.sendto(b"etsy.lat:1:2:3:4:5:6:7:8:9:10|ms", ("127.0.0.1", etsy_port))
        for path, want in [("stats_counts.app.hits.web", 10), ("stats.gauges.app.etsy.level", None),
                           ("stats.timers.app.etsy.lat.count", 10), ("stats.timers.app.etsy.lat.upper_90", 9),
                           ("stats.timers.app.etsy.lat.mean_90", 5), ("stats.timers.app.etsy.lat.upper", 10),
                           ("stats.timers.app.etsy.lat.lower", 1), ("stats.timers.app.etsy.lat.median", 5.5),
                           ("stats.timers.app.etsy.lat.sum", 55), ("stats_counts.loopd.lines_received", None)]:
            got = wait_for(f"carbon to store {path}",
                           lambda: (lambda s: s if s is not None and (want is None or s >= want) else None)(whisper_sum(path)),
                           seconds=30)
            if want is not None and got != want:
                failures.append(f"carbon, etsy layout: {path} sums to {got}, expected {want}")
        rate = wait_for("carbon to store stats.app.hits.web",
                        lambda: (lambda s: s if s is not None and s >= 4.9 else None)(whisper_sum("stats.app.hits.web")),
                        seconds=30)
        if not 4.9 <= rate <= 5.1:
            failures.append(f"carbon, etsy layout: the counter's rates sum to {rate}, expected 10 over 2 s flushes: 5")
        etsy.send_signal(signal.SIGTERM)
        etsy.wait(timeout=10)

        if failures:
            print("\n".join(failures))
            for name in ["loopd", "carbon", "prometheus", "loopd-etsy"]:
                print(f"--- {name}.log (tail)")
                print("".join(open(os.path.join(work, name + ".log")).readlines()[-20:]))
            return 1
        print(f"peers: statsd, datadog (UDP, Unix datagram and stream sockets), carbon-cache and prometheus agree with loopd ({sent_lines} lines);"
              " carbon holds etsy's layout")
        return 0
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
