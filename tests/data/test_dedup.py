"""Contamination detection (R25): normalization, shingling, and recall / precision on copies of
real GSM8K test questions planted among real GSM8K training questions."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from rlvr.data.dedup import (
    DEFAULT_THRESHOLD,
    NUM_TOKEN,
    Match,
    find_contamination,
    jaccard,
    lsh_params,
    normalize,
    remove_contaminated,
    shingles,
    text_digest,
)
from rlvr.records import Task

GSM8K = Path(__file__).resolve().parents[3] / "shared" / "data" / "gsm8k"  # ../shared/data


def _task(id_: str, prompt: str) -> Task:
    return Task(id=id_, prompt=prompt, reference="1", task_type="math", source="test")


# --- normalize / shingles / jaccard ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Natalia sold clips to 48 of her friends.", "natalia sold clips to <num> of her friends"),
        ("  Hello,\n\tWORLD!!  ", "hello world"),
        ("Janet’s ducks lay 16 eggs", "janets ducks lay <num> eggs"),
        ("Janet's ducks", "janets ducks"),
        ("It costs $80,000 and rose 1.5%.", "it costs <num> and rose <num>"),
        ("Eggs cost $.50 each", "eggs cost <num> each"),
        ("She eats three and bakes with Four.", "she eats <num> and bakes with <num>"),
        ("two-thirds water; ratio 7:11", "<num> thirds water ratio <num> <num>"),
        ("ﬁve ＦＵＬＬ-width", "<num> full width"),  # NFKC: the fi ligature, full-width letters
        ("snake_case stays apart", "snake case stays apart"),
        ("", ""),
        ("?!...", ""),
    ],
)
def test_normalize_examples(text, expected):
    assert normalize(text) == expected


def test_normalize_makes_number_perturbed_copies_identical():
    a = "Natalia sold clips to 48 of her friends in April, and then she sold half as many."
    b = "Natalia sold clips to 52 of her friends in April, and then she sold half as many."
    assert normalize(a) == normalize(b)
    assert text_digest(normalize(a)) == text_digest(normalize(b))
    assert NUM_TOKEN in normalize(a)


def test_shingles_are_word_trigrams():
    assert shingles("a b c d") == {"a b c", "b c d"}
    assert shingles("a b") == {"a b"}  # shorter than n: one shingle
    assert shingles("") == frozenset()
    assert shingles("a b c d", n=1) == {"a", "b", "c", "d"}
    with pytest.raises(ValueError, match="n must be >= 1"):
        shingles("a b", n=0)


def test_jaccard():
    assert jaccard(frozenset("ab"), frozenset("bc")) == pytest.approx(1 / 3)
    assert jaccard(frozenset("ab"), frozenset("ab")) == 1.0
    assert jaccard(frozenset(), frozenset()) == 0.0


def test_lsh_params_reach_the_required_recall():
    for threshold in (0.1, 0.25, 0.5, 0.9):
        bands, rows = lsh_params(threshold, 128)
        assert bands * rows <= 128
        assert 1 - (1 - threshold**rows) ** bands >= 0.995
    assert lsh_params(0.9, 128)[1] > lsh_params(0.25, 128)[1]  # stricter: longer bands


# --- find_contamination / remove_contaminated on hand-made items -------------------------------

_EVAL = [
    _task("e0", "Natalia sold clips to 48 of her friends in April, and then she sold half as many "
                "clips in May. How many clips did Natalia sell altogether in April and May?"),
    _task("e1", "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of "
                "babysitting. How much did she earn?"),
    _task("e2", "Betty is saving money for a new wallet which costs $100. Betty has only half of "
                "the money she needs. Her parents decided to give her $15 for that purpose, and "
                "her grandparents twice as much as her parents. How much more money does Betty "
                "need to buy the wallet?"),
]


def test_exact_near_and_clean_items():
    train = [
        _task("t-exact", _EVAL[1].prompt.upper()),
        _task("t-numbers", _EVAL[0].prompt.replace("48", "52")),
        _task("t-near", "Weng earns $12 an hour for dog walking. Yesterday, she only did 50 "
                        "minutes of dog walking. How much did she earn?"),
        _task("t-clean", "A bakery sells 30 loaves of bread each morning and closes at noon. "
                         "What fraction of the bread is rye?"),
        _task("t-empty", "?!"),
    ]
    matches = find_contamination(train, _EVAL)
    by_id = {m.train_id: m for m in matches}
    assert set(by_id) == {"t-exact", "t-numbers", "t-near"}
    assert by_id["t-exact"] == Match("t-exact", "e1", 1.0, "exact", train[0].prompt,
                                     _EVAL[1].prompt)
    assert (by_id["t-numbers"].kind, by_id["t-numbers"].eval_id) == ("exact", "e0")
    near = by_id["t-near"]
    assert (near.kind, near.eval_id) == ("near", "e1")
    assert DEFAULT_THRESHOLD <= near.similarity < 1.0
    assert near.to_dict()["similarity"] == near.similarity
    assert [m.train_id for m in matches] == ["t-exact", "t-numbers", "t-near"]  # training order
    kept = remove_contaminated(train, matches)
    assert [t.id for t in kept] == ["t-clean", "t-empty"]


def test_reports_the_closest_eval_item():
    base = _EVAL[2].prompt
    evaluation = [
        _task("far", base.replace("wallet", "bicycle").replace("grandparents", "aunts")
              .replace("Betty", "Maya")),
        _task("close", base.replace("wallet", "bicycle")),
    ]
    [match] = find_contamination([_task("t", base)], evaluation)
    assert match.eval_id == "close"
    assert match.similarity == pytest.approx(
        jaccard(shingles(normalize(base)), shingles(normalize(evaluation[1].prompt))))


def test_threshold_controls_near_matches():
    train = [_task("t", "Weng earns $12 an hour for dog walking. Yesterday, she only did 50 "
                        "minutes of dog walking. How much did she earn?")]
    [m] = find_contamination(train, _EVAL)
    assert find_contamination(train, _EVAL, threshold=min(1.0, m.similarity + 0.01)) == []


def test_empty_inputs_and_bad_arguments():
    assert find_contamination([], _EVAL) == []
    assert find_contamination(_EVAL, []) == []
    for kwargs in ({"threshold": 0.0}, {"threshold": 1.5}, {"num_perm": 8}, {"ngram": 0}):
        with pytest.raises(ValueError):
            find_contamination(_EVAL, _EVAL, **kwargs)


# --- planted copies of real GSM8K test questions -----------------------------------------------

# Light hand paraphrases of GSM8K test questions (0-based line index -> paraphrase): clauses
# reordered, a few words swapped for synonyms, names changed.
PARAPHRASES = {
    0: "Maria's ducks lay 16 eggs per day. She eats three for breakfast each morning and bakes "
       "muffins for her friends every day with four. She sells the rest at the farmers' market "
       "daily for $2 per fresh duck egg. How much in dollars does she make every day at the "
       "farmers' market?",
    1: "A robe needs 2 bolts of blue fiber and half that amount of white fiber. How many bolts "
       "does it take in total?",
    3: "Three times a week, James decides to run 3 sprints. He runs 60 meters per sprint. How "
       "many meters does he run in total each week?",
    5: "Kylar went to the shop to buy glasses for his new flat. One glass costs $5, but every "
       "second glass costs just 60% of the price. Kylar wants to buy 16 glasses. How much does "
       "he have to pay for them?",
    10: "A new app had 60 downloads in its first month. In the second month the number of "
        "downloads was three times as many as the downloads in the first month, but then "
        "dropped by 30% in the third month. How many downloads did the app have in total over "
        "the three months?",
    12: "Diego is planting a lemon tree. The tree will cost $90 to plant. Every year it will "
        "grow 7 lemons, which he can sell for $1.5 each. It costs $3 a year to water and "
        "fertilize the tree. How many years will it take before he begins earning money on the "
        "lemon tree?",
    25: "Sophie ordered one chicken meal costing $12, 5 packs of milk at $3 each, 4 apples at "
        "$1.50 each, and some boxes of pizza. Sophie paid $50 in total. If each box of pizza "
        "costs $8.50, how many boxes of pizza did Sophie order?",
    40: "Marcus's iPhone is four times as old as Leo's iPhone. Leo's iPhone is two times older "
        "than Nina's iPhone. If Nina's iPhone is 1 year old, how old is Marcus's iPhone?",
    50: "Lloyd owns an egg farm. His hens lay 252 eggs per day and he sells them for $2 a "
        "dozen. How much money does Lloyd make from eggs each week?",
    70: "Judy teaches 5 dance classes every weekday and 8 classes on Saturday. If each class "
        "has 15 students and she charges $15.00 per student, how much money does she earn in "
        "1 week?",
    80: "Two girls each received 1/6 of the 24 liters of water. Then a boy received 6 liters "
        "of water. How many liters of water were left?",
}
EXACT_COPIES = [2, 4, 6, 7, 9, 11, 13, 14, 100, 500]
NUMBER_PERTURBED = [15, 20, 30, 60, 101, 200, 300, 700, 1000, 1318]

# Real GSM8K template siblings: training questions that pose a test question's problem with
# other names, objects and numbers (found by this module on the full sets; see the slow test).
# They are contaminated, so they are not used as "unrelated" items.
KNOWN_SIBLINGS = {"gsm8k-train-21": "gsm8k-test-633", "gsm8k-train-139": "gsm8k-test-309",
                  "gsm8k-train-1315": "gsm8k-test-603", "gsm8k-train-5163": "gsm8k-test-603",
                  "gsm8k-train-3727": "gsm8k-test-825"}

_NUMBER_WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                 "eleven", "twelve"]
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
_NUMERAL = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?|\.\d+")


def perturb_numbers(text: str) -> str:
    """Every numeral and number word changed: integers +3 (commas dropped), decimals +1.25,
    number words moved two steps along one..twelve (cyclically), capitalisation kept."""

    def numeral(m: re.Match) -> str:
        s = m.group().replace(",", "")
        return f"{float(s) + 1.25:g}" if "." in s else str(int(s) + 3)

    def word(m: re.Match) -> str:
        w = m.group()
        new = _NUMBER_WORDS[(_NUMBER_WORDS.index(w.lower()) + 2) % len(_NUMBER_WORDS)]
        return new.capitalize() if w[0].isupper() else new

    return _NUMBER_WORD.sub(word, _NUMERAL.sub(numeral, text))


def test_perturb_numbers_changes_every_number():
    src = "Three of 12 boxes cost $1,200.50 and one costs $.5"
    out = perturb_numbers(src)
    assert out == "Five of 15 boxes cost $1201.75 and three costs $1.75"


@pytest.fixture(scope="module")
def gsm8k():
    if not (GSM8K / "test.jsonl").is_file() or not (GSM8K / "train.jsonl").is_file():
        pytest.skip(f"GSM8K not found under {GSM8K}")
    from rlvr.tasks.sources import load_gsm8k

    return load_gsm8k(GSM8K, "train"), load_gsm8k(GSM8K, "test")


def _planted(test: list[Task]) -> dict[str, tuple[str, str]]:
    """planted prompt id -> (prompt, source eval id)."""
    out = {}
    for i in EXACT_COPIES:
        out[f"plant-exact-{i}"] = (test[i].prompt, test[i].id)
    for i in NUMBER_PERTURBED:
        new = perturb_numbers(test[i].prompt)
        assert new != test[i].prompt
        out[f"plant-numbers-{i}"] = (new, test[i].id)
    for i, text in PARAPHRASES.items():
        out[f"plant-paraphrase-{i}"] = (text, test[i].id)
        out[f"plant-mixed-{i}"] = (perturb_numbers(text), test[i].id)
    return out


def test_planted_copies_are_caught_and_unrelated_items_kept(gsm8k):
    train_all, test = gsm8k
    planted = _planted(test)
    unrelated = [t for t in train_all if t.id not in KNOWN_SIBLINGS][:200]
    train = [_task(pid, text) for pid, (text, _) in planted.items()] + unrelated

    start = time.perf_counter()
    matches = find_contamination(train, test)
    seconds = time.perf_counter() - start

    flagged = {m.train_id: m for m in matches}
    true_pos = [pid for pid in planted if pid in flagged]
    recall = len(true_pos) / len(planted)
    precision = len(true_pos) / len(flagged) if flagged else 1.0
    lowest = min(flagged[p].similarity for p in true_pos)
    print(f"\nplanted={len(planted)} unrelated={len(unrelated)} flagged={len(flagged)} "
          f"precision={precision:.3f} recall={recall:.3f} lowest planted similarity={lowest:.3f} "
          f"({seconds:.2f}s vs {len(test)} eval items)")
    for pid in sorted(p for p in planted if "paraphrase" in p):
        print(f"  {pid}: {flagged[pid].similarity:.3f}" if pid in flagged else f"  {pid}: MISSED")

    assert recall == 1.0, sorted(set(planted) - set(flagged))
    assert precision == 1.0, sorted(set(flagged) - set(planted))
    for pid, (_, source) in planted.items():  # each reported with its source question
        assert flagged[pid].eval_id == source, pid
        expected_kind = "exact" if pid.startswith(("plant-exact", "plant-numbers")) else "near"
        assert flagged[pid].kind == expected_kind, pid
    kept = remove_contaminated(train, matches)
    assert [t.id for t in kept] == [t.id for t in unrelated]


@pytest.mark.slow
def test_full_gsm8k_train_vs_test(gsm8k, monkeypatch):
    import rlvr.data.dedup as dedup

    train, test = gsm8k
    confirmed = 0
    exact_jaccard = dedup.jaccard

    def counting(a, b):
        nonlocal confirmed
        confirmed += 1
        return exact_jaccard(a, b)

    monkeypatch.setattr(dedup, "jaccard", counting)
    matches = find_contamination(train, test)
    exact = [m for m in matches if m.kind == "exact"]
    pairs = len(train) * len(test)
    print(f"\nGSM8K train {len(train)} x test {len(test)}: {len(exact)} exact, "
          f"{len(matches) - len(exact)} near, {confirmed} candidate pairs confirmed "
          f"({confirmed / pairs:.1%} of all pairs)")
    for m in sorted(matches, key=lambda m: -m.similarity)[:5]:
        print(f"  {m.similarity:.3f} {m.train_id} ~ {m.eval_id}")
    # What keeps it fast: LSH retrieves candidates, so exact Jaccard runs on a small share of
    # the pairs (about 5% on GSM8K), never on all of them.
    assert 0 < confirmed < 0.2 * pairs
    assert not exact
    found = {m.train_id: m.eval_id for m in matches}
    assert all(found.get(t) == e for t, e in KNOWN_SIBLINGS.items())
    assert len(matches) < 0.01 * len(train)  # unrelated problems are kept
