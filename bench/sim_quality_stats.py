"""The numbers of bench/sim_quality.py: a measure's value out of one run's JSON,
its mean and standard error over seeds, and troupe's verdict against the best
baseline (the 2-SE rule). No I/O here, so bench/test_sim_quality.py can check
the rule on made-up numbers.

A measure is read out of `troupe simulate -o json`: a policy's object for the
overall figure, one of its "by_size" buckets for a figure by job size. A field
the measure names and the JSON lacks is an error naming the field (MissingField),
never a silent zero: an older simulator must not look like a tie.
"""
import math
from dataclasses import dataclass
from typing import Optional, Tuple

LOWER = "lower"
HIGHER = "higher"


class MissingField(Exception):
    """The JSON of a run lacks a field a measure reads."""


@dataclass(frozen=True)
class Measure:
    """One row kind of the tables.

    name: the short name (--measures, --front-measures, the JSON output);
    label: the table's text; better: LOWER or HIGHER; path: the keys to the
    overall value in a policy's object (None: no overall figure); bucket_path:
    the keys in a by_size bucket (None: no figure by size); scale: multiplies
    the value for display (100 for a share shown in %, 1/60 for seconds in
    minutes); kinds: the study kinds it applies to; multi: meaningless for a
    bucket with no multi-GPU pod (pods_multi 0), which is then skipped; key:
    drawn in the bar chart; levels: the value is a {level: share} object, one
    row per level present; per: the keys of a denominator the value is divided
    by (a count over a count; None when it is 0).
    """
    name: str
    label: str
    better: str
    path: Optional[Tuple[str, ...]]
    bucket_path: Optional[Tuple[str, ...]]
    scale: float = 1.0
    kinds: Tuple[str, ...] = ("single", "gangs")
    multi: bool = False
    key: bool = False
    levels: bool = False
    per: Optional[Tuple[str, ...]] = None


def dig(obj, path, where):
    """The value at <path> in <obj>; MissingField names the first missing key."""
    for i, k in enumerate(path):
        if not isinstance(obj, dict) or k not in obj:
            raise MissingField(f"{where}: no field \"{'.'.join(path[:i + 1])}\" in the "
                               "simulator's JSON (is troupe simulate older than "
                               "this script?)")
        obj = obj[k]
    return obj


def bucket_of(policy_obj, size, where):
    """The by_size bucket of <size> in one policy's object, or None if this run
    had no job of that size (a rare large size may be absent on some seeds)."""
    for b in dig(policy_obj, ("by_size",), where):
        if dig(b, ("size",), where + " by_size") == size:
            return b
    return None


def value_of(measure, policy_obj, size, level, where):
    """One run's value of <measure> (overall when <size> is None), unscaled, or
    None when the run has nothing to measure there (no job of that size, a
    bucket without multi-GPU pods, a null in the JSON)."""
    if size is None:
        obj, path = policy_obj, measure.path
    else:
        obj, path = bucket_of(policy_obj, size, where), measure.bucket_path
        if obj is None:
            return None
        if measure.multi and dig(obj, ("pods_multi",), where + " by_size") == 0:
            return None
        # A bucket of single pods has no gang to be in one domain.
        if measure.levels and path[0] not in obj:
            return None
    v = dig(obj, path, where if size is None else f"{where} by_size[{size}]")
    if measure.levels:
        if not isinstance(v, dict):
            raise MissingField(f"{where}: \"{'.'.join(path)}\" is not an object of levels")
        v = v.get(level)
    if v is None:
        return None
    if measure.per is not None:
        d = dig(obj, measure.per, where)
        return None if not d else float(v) / float(d)
    return float(v)


def mean_se(values):
    """(mean, standard error of the mean, n) of the non-None values; the SE is
    the sample standard deviation over sqrt(n), NaN below two values."""
    xs = [v for v in values if v is not None]
    n = len(xs)
    if n == 0:
        return (math.nan, math.nan, 0)
    m = sum(xs) / n
    if n < 2:
        return (m, math.nan, n)
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return (m, math.sqrt(var / n), n)


def better_of(a, b, better):
    """True when mean <a> is strictly better than mean <b>."""
    return a < b if better == LOWER else a > b


def best_baseline(stats, baselines, better):
    """The baseline with the best mean (the first of equals), or None if none
    has a value. <stats>: policy -> (mean, se, n)."""
    best = None
    for p in baselines:
        m, _, n = stats[p]
        if n == 0:
            continue
        if best is None or better_of(m, stats[best][0], better):
            best = p
    return best


def verdict(ours, theirs, better):
    """troupe's verdict on one measure: "leads" when its mean is better than
    the baseline's by more than two standard errors of the difference,
    sqrt(se_a^2 + se_b^2); "behind" when worse by as much; else "tie". <ours>
    and <theirs> are (mean, se, n); "n/a" when either has no value. With a
    single seed (SE NaN) nothing can be told apart: "tie"."""
    (ma, sa, na), (mb, sb, nb) = ours, theirs
    if na == 0 or nb == 0:
        return "n/a"
    diff = ma - mb if better == HIGHER else mb - ma     # > 0: troupe better
    return classify(diff, math.sqrt(sa * sa + sb * sb))


def classify(diff, se):
    """"leads" when <diff> (> 0: troupe better) exceeds two <se>, "behind"
    when it falls below minus two, else "tie" (also when <se> is NaN)."""
    if math.isnan(se):
        return "tie"
    if diff > 2 * se:
        return "leads"
    if diff < -2 * se:
        return "behind"
    return "tie"


def paired_verdict(xs, ys, better):
    """troupe's verdict from per-seed values: every policy replays the same
    trace of a seed, so the seeds pair troupe's value with the baseline's and
    the difference is judged against the standard error of the per-seed
    differences (common random numbers: the seed's own noise cancels).
    "leads" when the mean difference favours troupe by more than two of those
    standard errors, "behind" when it disfavours it by as much, else "tie";
    "n/a" with no seed where both have a value; "tie" with one."""
    d = [(x - y if better == HIGHER else y - x)
         for x, y in zip(xs, ys) if x is not None and y is not None]
    if not d:
        return "n/a"
    m, se, n = mean_se(d)
    return classify(m, se)


def dominates(p, q, betters):
    """True when point <p> is at least as good as <q> on every coordinate and
    strictly better on one; <betters>: each coordinate's direction."""
    strict = False
    for a, b, d in zip(p, q, betters):
        if better_of(b, a, d):
            return False
        if better_of(a, b, d):
            strict = True
    return strict


def non_dominated(points, betters):
    """The indices of <points> no other point dominates (the Pareto front)."""
    return [i for i, p in enumerate(points)
            if not any(dominates(q, p, betters) for j, q in enumerate(points) if j != i)]
