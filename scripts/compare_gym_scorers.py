"""Measure before keeping our own: rlvr's countdown and knights-and-knaves verifiers
(:mod:`rlvr.rewards.logic`) against reasoning-gym's scorers (``countdown``,
``knights_knaves`` ``score_answer``) on the same items.

Items: reasoning-gym's own (``create_dataset``) and rlvr's (:func:`rlvr.tasks.logic.
generate_logic`), each converted to the other's form (a reasoning-gym knights-and-knaves
statement tree becomes rlvr claims: ``->`` as ``not a or b``, ``<=>`` as ``(a and b) or
(not a and not b)``). Candidates per item, each written in the scorer's own answer format
(rlvr: a final ``#### ...`` line; reasoning-gym: the ``<answer>`` text): the reference,
correct alternatives, wrong answers and malformed ones. A scorer *accepts* a candidate when
rlvr says ``correct`` / reasoning-gym scores 1.0. Each candidate kind has an expected
verdict under the item's own rules (rlvr's countdown may leave numbers out and forbids unary
minus; reasoning-gym's must use every number); every disagreement is listed with who
matches that expectation.

Usage::

    python scripts/compare_gym_scorers.py [--n 100] [--seed 0] [--list]
"""

from __future__ import annotations

import argparse
import random
from collections import Counter, defaultdict
from fractions import Fraction

import reasoning_gym as rg

from rlvr.rewards.logic import evaluate_countdown, parse_countdown, verify_logic
from rlvr.tasks.logic import generate_logic

# ------------------------------------------------------------------ items


def rg_countdown(n: int, seed: int) -> list[dict]:
    ds = rg.create_dataset("countdown", min_numbers=3, max_numbers=4, seed=seed, size=n)
    items = []
    for entry in ds:
        md = entry["metadata"]
        items.append({"source": "rg", "entry": entry, "solution": entry["answer"],
                      "ref": {"kind": "countdown", "numbers": md["numbers"],
                              "target": md["target"]},
                      "all_numbers": True})
    return items


def rlvr_countdown(n: int, seed: int) -> list[dict]:
    items = []
    for task in generate_logic("countdown-3:0.5,countdown-4:0.5", n, seed=seed):
        ref = task.reference
        entry = {"question": task.prompt, "answer": task.metadata["expression"],
                 "metadata": {"numbers": ref["numbers"], "target": ref["target"]}}
        items.append({"source": "rlvr", "entry": entry, "solution": task.metadata["expression"],
                      "ref": ref, "all_numbers": False})
    return items


def _claim(stmt, names: list[str]) -> dict:
    op = stmt[0]
    if op in ("telling-truth", "lying"):
        return {"op": "is", "who": names[stmt[1]],
                "role": "knight" if op == "telling-truth" else "knave"}
    parts = [_claim(s, names) for s in stmt[1:]]
    if op == "not":
        return {"op": "not", "claim": parts[0]}
    if op in ("and", "or"):
        return {"op": op, "claims": parts}
    a, b = parts
    if op == "->":
        return {"op": "or", "claims": [{"op": "not", "claim": a}, b]}
    if op == "<=>":
        return {"op": "or", "claims": [{"op": "and", "claims": [a, b]},
                                       {"op": "and", "claims": [{"op": "not", "claim": a},
                                                                {"op": "not", "claim": b}]}]}
    raise ValueError(f"unknown statement {stmt!r}")


def rg_kk(n: int, seed: int) -> list[dict]:
    items = []
    for people in (2, 3):
        ds = rg.create_dataset("knights_knaves", n_people=people, seed=seed, size=n // 2)
        for entry in ds:
            md = entry["metadata"]
            names = md["names"]
            statements = [{"speaker": names[i], "claim": _claim(s, names)}
                          for i, s in enumerate(md["statements"])]
            solution = {p: "knight" if k else "knave" for p, k in zip(names, md["solution"])}
            terms = md["knight_knave_terms"]
            items.append({"source": "rg", "entry": entry, "solution": solution,
                          "terms": {"knight": terms["knight"], "knave": terms["knave"]},
                          "ref": {"kind": "knights_knaves", "people": names,
                                  "statements": statements}})
    return items


def rg_phrase(assignment: dict, terms: dict) -> str:
    """reasoning-gym's answer phrasing: ``A is a knight, and B is a knave.``"""
    parts = [f"{p} is {'an' if terms[r][0] in 'aeiou' else 'a'} {terms[r]}"
             for p, r in assignment.items()]
    return (", ".join(parts[:-1]) + ", and " + parts[-1] + ".") if len(parts) > 1 \
        else parts[0] + "."


def rlvr_phrase(assignment: dict) -> str:
    """rlvr's answer phrasing: ``A: knight, B: knave``."""
    return ", ".join(f"{p}: {r}" for p, r in assignment.items())


def rlvr_kk(n: int, seed: int) -> list[dict]:
    items = []
    plain = {"knight": "knight", "knave": "knave"}
    for task in generate_logic("kk-2:0.5,kk-3:0.5", n, seed=seed):
        solution = task.metadata["solution"]
        entry = {"question": task.prompt, "answer": rg_phrase(solution, plain),
                 "metadata": {}}
        items.append({"source": "rlvr", "entry": entry, "solution": solution, "terms": plain,
                      "ref": task.reference})
    return items

# ------------------------------------------------------------------ candidates
# (kind, rlvr answer line, reasoning-gym answer, expected accept under the item's rules)


def _render(tree, swap: bool) -> str:
    if isinstance(tree, int):
        return str(tree)
    op, a, b = tree
    if swap and op in "+*":
        a, b = b, a
    return f"({_render(a, swap)} {op} {_render(b, swap)})"


def _value(text: str) -> Fraction | None:
    try:
        return evaluate_countdown(parse_countdown(text))
    except (ValueError, ZeroDivisionError):
        return None


def countdown_candidates(item: dict, rng: random.Random) -> list[tuple]:
    sol, ref = item["solution"], item["ref"]
    numbers, target = ref["numbers"], ref["target"]
    out = [("reference", sol, sol, True)]
    try:
        tree = parse_countdown(sol)
    except ValueError:  # reasoning-gym writes some solutions with a unary minus
        tree = None
    if tree is not None and not isinstance(tree, int):
        out.append(("commuted", _render(tree, True), _render(tree, True), True))
        op, left, right = tree
        for new in "+-*/":
            text = f"{_render(left, False)} {new} {_render(right, False)}"
            if new != op and _value(text) not in (None, target):
                out.append(("wrong_value", text, text, False))
                break
    k = rng.choice(numbers)
    out.append(("number_reused", f"{sol} + {k} - {k}", f"{sol} + {k} - {k}", False))
    out.append(("target_alone", str(target), str(target), False))
    neg = f"-(-({sol}))"
    out.append(("unary_minus", neg, neg, item["source"] == "rg"))  # rlvr's rules forbid it
    # rlvr's verifier reads `expr = N` as the expression and a claim of its value
    # (rlvr.rewards.logic.split_claim); reasoning-gym's answer is the expression alone
    out.append(("with_equals", f"{sol} = {target}", f"{sol} = {target}",
                item["source"] == "rlvr"))
    out.append(("prose", "I could not find one.", "I could not find one.", False))
    out.append(("empty", "", "", False))
    return out


def kk_candidates(item: dict, rng: random.Random) -> list[tuple]:
    sol, terms = item["solution"], item["terms"]
    people = list(sol)
    flip = {"knight": "knave", "knave": "knight"}
    one = dict(sol)
    who = rng.choice(people)
    one[who] = flip[one[who]]
    every = {p: flip[r] for p, r in sol.items()}
    reordered = {p.lower(): sol[p] for p in reversed(people)}
    missing = {p: sol[p] for p in people[:-1]}
    twice = {**sol}
    out = [("reference", rlvr_phrase(sol), rg_phrase(sol, terms), True),
           ("reordered_lowercase", rlvr_phrase(reordered), rg_phrase(reordered, terms), True),
           ("one_flipped", rlvr_phrase(one), rg_phrase(one, terms), False),
           ("all_flipped", rlvr_phrase(every), rg_phrase(every, terms), False),
           ("person_missing", rlvr_phrase(missing), rg_phrase(missing, terms), False),
           ("named_twice", rlvr_phrase(twice) + f", {who}: {flip[sol[who]]}",
            rg_phrase(twice, terms)[:-1] + f", and {who} is a {terms[flip[sol[who]]]}.", False),
           # the right answer in the other library's phrasing (expected: accepted)
           ("other_phrasing", rg_phrase(sol, {"knight": "knight", "knave": "knave"}),
            rlvr_phrase({p: terms[r] for p, r in sol.items()}), True),
           ("trailing_prose", rlvr_phrase(sol) + ". That is the only consistent assignment",
            rg_phrase(sol, terms) + " That is the only consistent assignment.", True),
           ("prose", "I do not know.", "I do not know.", False),
           ("empty", "", "", False)]
    return out

# ------------------------------------------------------------------ scoring and report


def score(family: str, items: list[dict], seed: int):
    ds = rg.create_dataset(family, seed=0, size=1)
    candidates = countdown_candidates if family == "countdown" else kk_candidates
    rng = random.Random(seed)
    rows = []
    for i, item in enumerate(items):
        for kind, ours, theirs, expected in candidates(item, rng):
            verdict = verify_logic(f"Work.\n#### {ours}", item["ref"])
            rg_score = ds.score_answer(theirs if theirs else None, item["entry"])
            rows.append({"family": family, "source": item["source"], "kind": kind,
                         "item": i, "ours": ours, "theirs": theirs, "expected": expected,
                         "rlvr": verdict.status.value, "rlvr_ok": verdict.status.value ==
                         "correct", "rg": rg_score, "rg_ok": rg_score >= 1.0})
    return rows


# Why the two scorers differ on a candidate kind (family, kind): the reason only. Which scorer
# matches the item's rules is computed from the rows (the expected verdict), never written here.
REASON = {
    ("countdown", "unary_minus"): "rlvr's grammar refuses unary minus (its own prompt forbids "
    "it); reasoning-gym's prompt does not, and its value check accepts it",
    ("countdown", "reference"): "rlvr's puzzles may leave numbers out (its prompt says so); "
    "reasoning-gym requires every number to be used (scores 0.05)",
    ("countdown", "commuted"): "as 'reference': a number left out",
    ("countdown", "with_equals"): "rlvr reads 'expr = N' as the expression and a claim of its "
    "value and accepts a true claim; reasoning-gym wants the expression alone (scores 0.01)",
    ("knights_knaves", "other_phrasing"): "rlvr reads both phrasings ('A: knight, ...' and "
    "reasoning-gym's 'A is a knight, and ...'); reasoning-gym's term matching does not read "
    "'Name: role'",
    ("knights_knaves", "trailing_prose"): "rlvr's final line must hold only the assignment "
    "(unparsed: a format rule); reasoning-gym finds the assignment in the sentence",
}


def _who(row: dict) -> str:
    """The scorer whose verdict on a disagreement is the expected one."""
    return "rlvr" if row["rlvr_ok"] == row["expected"] else "reasoning-gym"


def report(rows: list[dict], show_all: bool) -> None:
    groups = defaultdict(list)
    for r in rows:
        groups[(r["family"], r["source"], r["kind"])].append(r)
    print("| family | item source | candidate | n | expected | rlvr accepts | rg accepts "
          "| agree | rg mean score |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (family, source, kind), rs in groups.items():
        n = len(rs)
        agree = sum(r["rlvr_ok"] == r["rg_ok"] for r in rs)
        expected = "accept" if rs[0]["expected"] else "reject"
        print(f"| {family} | {source} | {kind} | {n} | {expected} "
              f"| {sum(r['rlvr_ok'] for r in rs)} | {sum(r['rg_ok'] for r in rs)} "
              f"| {agree} | {sum(r['rg'] for r in rs) / n:.3f} |")
    total = len(rows)
    agree = sum(r["rlvr_ok"] == r["rg_ok"] for r in rows)
    print(f"\nagreement (rlvr and reasoning-gym accept or reject alike): {agree}/{total} = "
          f"{agree / total:.1%}")
    for name, key in (("rlvr", "rlvr_ok"), ("reasoning-gym", "rg_ok")):
        hits = sum(r[key] == r["expected"] for r in rows)
        print(f"{name} gives the expected verdict: {hits}/{total} = {hits / total:.1%}")
    right = Counter()
    print("\ndisagreements (each listed; judged against the expected verdict under the item's "
          "own rules):")
    for (family, source, kind), rs in groups.items():
        bad = [r for r in rs if r["rlvr_ok"] != r["rg_ok"]]
        if not bad:
            continue
        matches = Counter(_who(r) for r in bad)
        for who, count in matches.items():
            right[(family, who)] += count
        verdict = ", ".join(f"{who} matches the rules in {count}"
                            for who, count in sorted(matches.items()))
        reason = REASON.get((family, kind), "see the expected column")
        print(f"- {family}/{source}/{kind}: {len(bad)} of {len(rs)} disagree; {verdict}; "
              f"{reason}")
        for r in (bad if show_all else bad[:3]):
            print(f"    item {r['item']}: rlvr {r['rlvr']} on {r['ours']!r}; rg "
                  f"{r['rg']:g} on {r['theirs']!r} -> {_who(r)} matches the rules")
        if not show_all and len(bad) > 3:
            print(f"    ... {len(bad) - 3} more (--list shows all)")
    print("\nwho matches the item's rules in the disagreements:",
          ", ".join(f"{f} {w}: {c}" for (f, w), c in sorted(right.items())))


def _hang_probe(answer: str, entry: dict, queue) -> None:
    queue.put(rg.create_dataset("countdown", seed=0, size=1).score_answer(answer, entry))


def safety(items: list[dict]) -> None:
    """What each countdown scorer does with hostile answers: code (a harmless marker file)
    and an exponent tower (run in a child process with a 10 s bound)."""
    import multiprocessing as mp
    import tempfile
    from pathlib import Path

    entry, ref = items[0]["entry"], items[0]["ref"]
    marker = Path(tempfile.mkdtemp()) / "ran"
    code = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    ds = rg.create_dataset("countdown", seed=0, size=1)
    rg_score = ds.score_answer(code, entry)
    ran = marker.exists()
    ours = verify_logic(f"#### {code}", ref)
    print(f"\ncode as the answer: reasoning-gym scored {rg_score:g} and the code "
          f"{'RAN (marker file written)' if ran else 'did not run'}; rlvr: {ours.status} "
          f"({ours.detail})")
    tower = "9**9**9"
    queue = mp.get_context("spawn").Queue()
    child = mp.get_context("spawn").Process(target=_hang_probe, args=(tower, entry, queue))
    child.start()
    child.join(10)
    hung = child.is_alive()
    if hung:
        child.kill()
    ours = verify_logic(f"#### {tower}", ref)
    print(f"{tower!r} as the answer: reasoning-gym "
          f"{'still running after 10 s (killed)' if hung else 'returned ' + str(queue.get())}; "
          f"rlvr: {ours.status} ({ours.detail})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100, help="items per family and source")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="list every disagreement")
    args = parser.parse_args()
    rows = (score("countdown", rg_countdown(args.n, args.seed), args.seed)
            + score("countdown", rlvr_countdown(args.n, args.seed), args.seed)
            + score("knights_knaves", rg_kk(args.n, args.seed), args.seed)
            + score("knights_knaves", rlvr_kk(args.n, args.seed), args.seed))
    report(rows, args.list)
    safety(rg_countdown(1, args.seed))


if __name__ == "__main__":
    main()
