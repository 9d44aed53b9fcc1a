"""What bench/e2e measures from a run's scrapes: the Prometheus text format of
kube-scheduler's and troupe's /metrics parsed into samples, counters summed over
labels, histogram bucket deltas between two scrapes and their quantiles (as
Prometheus' histogram_quantile), and troupe's own server-side seconds.

Kept apart from the runs (e2e_runs.py) because it is pure arithmetic on text:
no cluster, no processes, the part one checks by reading.
"""
import re


# ---- Prometheus text ------------------------------------------------------

LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """[(name, {label: value}, float)] of every sample."""
    out = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        key, _, val = line.rpartition(" ")
        name, _, rest = key.partition("{")
        try:
            v = float(val)
        except ValueError:
            continue
        out.append((name, dict(LABEL.findall(rest)), v))
    return out


def total(samples, name, **match):
    return sum(v for n, lab, v in samples
               if n == name and all(lab.get(k) == w for k, w in match.items()))


def buckets(samples, name, **match):
    """{upper bound: cumulative count}, summed over the other labels."""
    out = {}
    for n, lab, v in samples:
        if n == name + "_bucket" and all(lab.get(k) == w for k, w in match.items()):
            le = float(lab["le"])
            out[le] = out.get(le, 0.0) + v
    return out


def hist_delta(before, after, name, **match):
    b, a = buckets(before, name, **match), buckets(after, name, **match)
    d = {le: a[le] - b.get(le, 0.0) for le in a}
    return d, (total(after, name + "_sum", **match) - total(before, name + "_sum", **match),
               total(after, name + "_count", **match) - total(before, name + "_count", **match))


def hist_quantile(q, cum):
    """histogram_quantile over cumulative bucket counts: linear within the bucket;
    a rank in the +Inf bucket gives the largest finite bound."""
    les = sorted(cum)
    if not les or cum[les[-1]] <= 0:
        return None
    rank = q * cum[les[-1]]
    prev_le, prev_c = 0.0, 0.0
    for le in les:
        c = cum[le]
        if c >= rank:
            if le == float("inf"):
                return prev_le
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


def troupe_seconds(samples):
    """{metric name: seconds} of every troupe_*_seconds_total."""
    out = {}
    for n, _, v in samples:
        if n.startswith("troupe_") and n.endswith("_seconds_total"):
            out[n] = out.get(n, 0.0) + v
    return out
