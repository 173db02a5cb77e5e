"""Comparing sequences: tuples and intervals (ordered), sets and bare lists of values
(unordered, repeats counted once), labelled values (``x = 1, y = 2``), and a list answering a
single value (several candidates, or a decimal comma: ``1000,99``).

The elements are compared with the ``compare`` function the caller passes
(:func:`.equivalence.compare`), so any shape may be an element.
"""

from __future__ import annotations

import re

from .normalize import compact
from .outcome import Compare, Outcome, Policy, no, yes
from .scalars import compare_scalars
from .shapes import Assign, Scalar, Seq


def _distinct_count(items, policy, compare: Compare) -> int:
    reps: list = []
    for it in items:
        if not any(compare(r, it, policy).equal for r in reps):
            reps.append(it)
            if len(reps) > 1:
                return 2
    return len(reps)


def compare_seq(ref, resp, policy: Policy, compare: Compare) -> Outcome:
    """Compare when either side is a sequence (a tuple, an interval, a set or a bare list of
    values): a bare list of different values answering a single value offers several
    candidates (``multiple``); the elements are compared with ``compare``."""
    if not isinstance(ref, Seq):
        if resp.open == "" and len(resp.items) > 1:
            if _distinct_count(resp.items, policy, compare) > 1:
                alt = _decimal_comma(resp, ref, policy)
                if alt is not None:
                    return alt
                return Outcome(False, "several candidate answers for a single value", True)
            return compare(ref, resp.items[0], policy)
        if len(resp.items) == 1 and resp.open != "{":
            return compare(ref, resp.items[0], policy)
        return no("sequence vs single value")
    if not isinstance(resp, Seq):
        if len(ref.items) == 1 and ref.open != "{":
            return compare(ref.items[0], resp, policy)
        alt = _decimal_comma(ref, resp, policy)
        if alt is not None:
            return alt
        return no("single value vs several")
    return _compare_two_seqs(ref, resp, policy, compare)


def _decimal_comma(seq: Seq, single, policy) -> Outcome | None:
    """``1000,99`` / ``0,111``: a comma between digits is a decimal comma when the other side
    is one number."""
    m = re.fullmatch(r"\s*(-?\d+),(\d+)\s*", seq.raw or "")
    if not m or not isinstance(single, Scalar):
        return None
    out = compare_scalars(Scalar(f"{m.group(1)}.{m.group(2)}"), single, policy)
    return out if out.equal else None


def _interval_like(s: Seq) -> bool:
    return len(s.items) == 2 and s.open in "([" and s.close in ")]" and s.open != "" and (
        s.open != s.close.translate(str.maketrans(")]", "([")) or any(
            isinstance(i, Scalar) and "infty" in i.text for i in s.items))


def _compare_two_seqs(ref: Seq, resp: Seq, policy, compare: Compare) -> Outcome:
    if _interval_like(ref) or _interval_like(resp):
        if (ref.open, ref.close) != (resp.open, resp.close):
            return no("interval: different endpoint brackets")
    # Tuples and intervals are ordered; sets and bare lists (roots, solutions) are not, but a
    # bare list answering a tuple is read in the tuple's order.
    ordered = "{" not in (ref.open, resp.open) and (ref.open != "" or resp.open != "")
    if len(ref.items) != len(resp.items) and not ordered:
        # a set: repeats count once
        ref, resp = _distinct(ref, policy, compare), _distinct(resp, policy, compare)
    if len(ref.items) != len(resp.items):
        return no(f"{len(resp.items)} elements vs {len(ref.items)}")
    if _all_assign(ref.items) and _all_assign(resp.items):
        return _compare_mappings(ref.items, resp.items, policy, compare)
    if _all_assign(ref.items) or _all_assign(resp.items):
        # labelled values against a plain tuple: the tuple lists the variables in their
        # conventional (alphabetical) order, (x, y, z) or (a, b, c)
        ordered = True
        ref, resp = _by_label(ref), _by_label(resp)
    if ordered:
        for a, b in zip(ref.items, resp.items):
            if not compare(a, b, policy).equal:
                return no("tuple element differs")
        return yes("tuple: all elements equal")
    return _unordered(ref.items, resp.items, policy, compare)


def _distinct(seq: Seq, policy, compare: Compare) -> Seq:
    """``seq`` with repeated elements dropped (first occurrence kept); at most 64 elements are
    compared pairwise, longer lists are returned unchanged."""
    if len(seq.items) > 64:
        return seq
    kept: list = []
    for it in seq.items:
        if not any(compare(k, it, policy).equal for k in kept):
            kept.append(it)
    return Seq(tuple(kept), seq.open, seq.close, seq.pm, seq.raw)


def _by_label(seq: Seq) -> Seq:
    """``y = 2, x = 1`` -> ``x = 1, y = 2`` when every item is a value of a distinct
    one-letter variable (optionally subscripted: ``x_1, x_2``)."""
    if not _all_assign(seq.items):
        return seq
    keys = [compact(i.label) for i in seq.items]
    if len(set(keys)) != len(keys) or not all(re.fullmatch(r"[A-Za-z](?:_\d+)?", k) for k in keys):
        return seq
    order = sorted(range(len(keys)), key=lambda k: (keys[k][0], int(keys[k][2:] or 0)))
    return Seq(tuple(seq.items[k] for k in order), seq.open, seq.close, seq.pm, seq.raw)


def _all_assign(items) -> bool:
    return all(isinstance(i, Assign) for i in items)


def _compare_mappings(ref_items, resp_items, policy, compare: Compare) -> Outcome:
    ref_map = {compact(i.label): i.value for i in ref_items}
    resp_map = {compact(i.label): i.value for i in resp_items}
    if set(ref_map) == set(resp_map):
        ok = all(compare(ref_map[k], resp_map[k], policy).equal for k in ref_map)
        return Outcome(ok, "labelled values")
    return _unordered([i.value for i in ref_items], [i.value for i in resp_items], policy,
                      compare)


def _unordered(ref_items, resp_items, policy, compare: Compare) -> Outcome:
    """Every reference element matched by a distinct response element (any order)."""
    used = [False] * len(resp_items)
    for a in ref_items:
        for k, b in enumerate(resp_items):
            if not used[k] and compare(a, b, policy).equal:
                used[k] = True
                break
        else:
            return no("set: an element is missing")
    return yes("set: same elements")
