# Shared by the demos that load and unload models while they serve (demo.sh:
# serve; cluster-demo.sh: the cluster); sourced, never run. The functions use
# the caller's $http (HOST:PORT of the protocol front to ask), $work (a
# scratch folder) and metrics_urls (the Prometheus endpoints whose
# symphony_requests_total count the requests: serve's, or every frontend's).

# How the serve demo serves (the arguments after the binary; demo.sh and
# bench/experiments/load_timeline.sh): its three models from the exported
# repository, loaded and unloaded by request.
demo_serve_args=(serve examples/demo_repository.yaml --model-repository data/models/repository
  --model-control-mode explicit --load-model squeezenet1_1 --load-model shufflenet_v2_x0_5 --load-model resnet18)

# POST to the protocol's repository extension; prints the answer's body.
repository() { curl -sS --max-time 600 -X POST -H 'Content-Type: application/json' "http://$http/v2/repository$1"; }

# Prints the repository index (POST /v2/repository/index) as a table, under a heading.
print_index() {
  printf '\nrepository index, %s:\n' "$1" >&2
  repository /index | /usr/bin/python3 -c '
import json, sys
for m in json.load(sys.stdin):
    print("  %-20s %-3s %-12s %s" % (m["name"], m.get("version", ""), m.get("state", ""), m.get("reason", "")))
' >&2 || echo "  (the index could not be read)" >&2
}

# The helpers that talk to the server while it serves, in one Python process
# each: counts NAME (the request counts by model and outcome, every endpoint
# of metrics_urls, summed when read, saved as $work/counts.NAME); control OP
# MODEL (loads or unloads MODEL; prints how long it took, or the error, and
# saves the ms as $work/OP.ms); window [--at-least S] BEFORE AFTER OP MODEL
# [OP MODEL ...] (counts BEFORE, the controls at once, counts AFTER once they
# answered and, with --at-least, S seconds after BEFORE). A window is one
# process started before it opens, so that nothing starts inside it: a curl
# and a shell started there took longer than a cluster's load (175 ms against
# 11 on 2 busy cores) and their start cost the requests the window measures.
_model_control() {
  /usr/bin/python3 - "$work" "$http" "$@" -- "${metrics_urls[@]}" <<'PY'
import sys, threading, time, urllib.error, urllib.request
work, http, args = sys.argv[1], sys.argv[2], sys.argv[3:]
what, metrics = args[:args.index("--")], args[args.index("--") + 1:]

def counts(name):
    with open("%s/counts.%s" % (work, name), "wb") as f:
        for url in metrics:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    f.write(r.read())
            except (OSError, ValueError):
                pass

def control(op, model):
    url = "http://%s/v2/repository/models/%s/%s" % (http, model, op)
    t0 = time.monotonic()
    try:
        req = urllib.request.Request(url, b"", {"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=600) as r:
            body, ok = r.read().decode(errors="replace"), True
    except urllib.error.HTTPError as e:
        body, ok = e.read().decode(errors="replace"), False
    except OSError as e:
        body, ok = str(e), False
    ms = int(1000 * (time.monotonic() - t0))
    ok = ok and '"error"' not in body
    print("%s of %s: %d ms" % (op, model, ms) if ok else "error: %s of %s failed: %s" % (op, model, body),
          file=sys.stderr, flush=True)
    with open("%s/%s.ms" % (work, op), "w") as f:
        f.write("%d\n" % ms if ok else "")
    return ok

if what[0] == "counts":
    counts(what[1])
elif what[0] == "control":
    sys.exit(0 if control(what[1], what[2]) else 1)
else:
    at_least = 0.0
    if what[1] == "--at-least":
        at_least, what = float(what[2]), what[:1] + what[3:]
    before, after, pairs = what[1], what[2], list(zip(what[3::2], what[4::2]))
    time.sleep(0.5)  # this process's own start settles before the window opens
    opened = time.monotonic()
    counts(before)
    ok = [False] * len(pairs)
    threads = [threading.Thread(target=lambda i=i, p=p: ok.__setitem__(i, control(*p))) for i, p in enumerate(pairs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(max(0.0, opened + at_least - time.monotonic()))
    counts(after)
    sys.exit(0 if all(ok) else 1)
PY
}
control() { _model_control control "$1" "$2"; }
counts() { _model_control counts "$1"; }
control_window() { _model_control window "$@"; }

# Prints the bad rate (late, dropped, errors over all ended) of the models
# other than those left out between each pair of saved counts, and writes
# them to $work/bad_rates.json: $1 who they are ("the three others (serve's
# counts)"), $2 the models left out (comma-separated), $3 the phases' names
# (comma-separated), the rest the counts' names in order.
print_bad_rates() {
  /usr/bin/python3 - "$work" "$@" <<'PY' >&2 || echo "(the bad rates could not be read)" >&2
import json, re, sys
work, who, left_out, names, points = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4].split(","), sys.argv[5:]
def read(point):
    out = {}
    for line in open("%s/counts.%s" % (work, point)):
        m = re.match(r'symphony_requests_total\{([^}]*)\} (\S+)', line)
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1))) if m else {}
        if "outcome" in labels and labels.get("model") not in left_out:
            out[labels["outcome"]] = out.get(labels["outcome"], 0) + float(m.group(2))
    return out
counts = [read(p) for p in points]
line, phases = [], []
for name, a, b in zip(names, counts, counts[1:]):
    n = {k: b.get(k, 0) - a.get(k, 0) for k in b}
    ended = sum(n.values())
    bad = ended - n.get("ok", 0)
    kinds = {k: int(v) for k, v in sorted(n.items()) if k != "ok" and v}
    line.append("%s %.2f %% (%d of %d%s)" % (name, 100.0 * bad / ended if ended else 0, bad, ended,
                                             "".join(": %s %d" % kv if i == 0 else ", %s %d" % kv
                                                     for i, kv in enumerate(kinds.items()))))
    phases.append({"phase": name, "bad": int(bad), "ended": int(ended), "bad_rate": bad / ended if ended else 0.0,
                   "bad_by_outcome": kinds})
print("bad rate of %s: %s" % (who, ", ".join(line)))
json.dump(phases, open("%s/bad_rates.json" % work, "w"), indent=2)
PY
}
