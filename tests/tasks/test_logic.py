"""Logic tasks (R5): countdown and knights-and-knaves generators and their verifiers."""

import json
from fractions import Fraction

import pytest

from rlvr.records import Task
from rlvr.rewards import RewardConfig, Status
from rlvr.rewards.pipeline import RewardPipeline
from rlvr.rewards.registry import VERIFIERS
from rlvr.tasks.logic import (
    LEVELS,
    LogicParseError,
    claim_holds,
    evaluate_countdown,
    generate_logic,
    parse_assignment,
    parse_countdown,
    parse_mixture,
    render_claim,
    solve_knights_knaves,
    verify_logic,
)

CD = {"kind": "countdown", "numbers": [3, 7, 25, 50], "target": 75}
CD_DUP = {"kind": "countdown", "numbers": [2, 2, 5, 10], "target": 20}
CD_24 = {"kind": "countdown", "numbers": [1, 3, 4, 6], "target": 24}


def _is(who, role):
    return {"op": "is", "who": who, "role": role}


# Hand-solved: if Alice is a knight, Bob is a knave, so Carol's "Bob is a knight" is false and
# Carol is a knave (consistent). If Alice is a knave, Bob is a knight, so Alice and Carol are
# of a kind (Carol a knave), but then Carol's "Bob is a knight" is true: impossible.
KK = {
    "kind": "knights_knaves",
    "people": ["Alice", "Bob", "Carol"],
    "statements": [
        {"speaker": "Alice", "claim": _is("Bob", "knave")},
        {"speaker": "Bob", "claim": {"op": "same", "who": ["Alice", "Carol"]}},
        {"speaker": "Carol", "claim": _is("Bob", "knight")},
    ],
}
KK_SOLUTION = {"Alice": "knight", "Bob": "knave", "Carol": "knave"}


def verdict(answer_line: str, reference: dict, reasoning: str = "Some reasoning.\n"):
    return verify_logic(f"{reasoning}{answer_line}", reference)


# ------------------------------------------------------------------ countdown: parser


@pytest.mark.parametrize(
    "text,value",
    [
        ("50 + 25", 75),
        ("(50 + 25) * 7 / 7", 75),
        ("50 - 25 - 3", 22),  # left associative
        ("50 / 25 * 3", 6),
        ("3 + 7 * 25", 178),
        ("7 / 2", Fraction(7, 2)),
        ("  ( ( 3 ) )  ", 3),
        ("6 / (1 - 3 / 4)", 24),
    ],
)
def test_countdown_parser_and_exact_value(text, value):
    assert evaluate_countdown(parse_countdown(text)) == value


@pytest.mark.parametrize(
    "text", ["", "-3 + 78", "50 - -25", "3 ** 2", "2 ^ 3", "3.5", "3 +", "(3 + 4", "3 + 4)",
             "3 4", "()", "50 + 25 = 75", "1_000", "3,7"]
)
def test_countdown_parser_rejects_outside_grammar(text):
    with pytest.raises(LogicParseError):
        parse_countdown(text)


# ------------------------------------------------------------------ countdown: verifier


@pytest.mark.parametrize(
    "answer",
    ["50 + 25", "3 * 25", "(50 - 25) * 3", "50+25", " 25 *3 "],
)
def test_countdown_correct_expressions_written_differently(answer):
    v = verdict(f"#### {answer}", CD)
    assert v.status is Status.correct, v.detail
    assert v.extracted == answer.strip() and v.method == "hash"


def test_countdown_fractions_and_duplicates():
    assert verdict("#### 6 / (1 - 3 / 4)", CD_24).status is Status.correct
    assert verdict("#### (2 + 2) * 5", CD_DUP).status is Status.correct  # both 2s, once each
    assert verdict("#### 10 * 2", CD_DUP).status is Status.correct


@pytest.mark.parametrize(
    "reference,answer,why",
    [
        (CD, "50 + 7 * 3", "= 71"),  # wrong value
        (CD, "50 + 25 + 25 - 25", "used more often"),  # 25 twice over
        (CD, "(50 + 25) * 7 / 7", "used more often"),  # 7 is given once
        (CD, "50 + 5 * 5", "not one of"),  # 5 not given
        (CD, "75", "not one of"),
        (CD_DUP, "(2 + 2 + 2) * 5 - 10", "used more often"),
        (CD_DUP, "10 / (2 - 2)", "division by zero"),
    ],
)
def test_countdown_wrong(reference, answer, why):
    v = verdict(f"#### {answer}", reference)
    assert v.status is Status.wrong and why in v.detail, v.detail


@pytest.mark.parametrize(
    "completion",
    [
        "50 + 25",  # no #### line
        "The answer is 50 + 25.",
        "#### ",
        "#### 50 - (-25)",  # unary minus is not allowed
        "#### 75 = 50 + 25",  # policy: only "expr = N" carries a claim, not the reverse
        "#### (50 + 25",
    ],
)
def test_countdown_unparsed(completion):
    assert verify_logic(completion, CD).status is Status.unparsed


def test_last_hash_line_is_the_answer():
    assert verify_logic("#### 3 * 7\nno, rather\n#### 50 + 25", CD).status is Status.correct
    assert verify_logic("#### 50 + 25\nno, rather\n#### 3 * 7", CD).status is Status.wrong


def test_nesting_limit_is_50():
    ok = "(" * 50 + "50 + 25" + ")" * 50
    deep = "(" * 51 + "50 + 25" + ")" * 51
    assert len(deep) <= 200
    assert verdict(f"#### {ok}", CD).status is Status.correct
    v = verdict(f"#### {deep}", CD)
    assert v.status is Status.unparsed and "nested" in v.detail


def _never_evaluated(monkeypatch):
    """Make evaluating a countdown tree fail the test: a rejected answer is never computed."""
    import rlvr.rewards.logic as logic

    def refuse(tree):
        raise AssertionError(f"evaluated a rejected expression: {tree!r}")

    monkeypatch.setattr(logic, "evaluate_countdown", refuse)


@pytest.mark.parametrize(
    "expression, reason",
    [
        ("2**999999999", "unexpected '*' where a number or '(' is expected"),
        ("9**9**9**9", "unexpected '*' where a number or '(' is expected"),
        ("(lambda: 1)()", "unexpected character 'l'"),
        ("open('/etc/passwd').read()", "unexpected character 'o'"),
        ("[x for x in ().__class__.__bases__[0].__subclasses__()]", "unexpected character '['"),
        ("1 + " * 2500 + "1", "expression longer than 200 characters"),  # 10,000 characters
        ("(" * 1000 + "3" + ")" * 1000, "expression longer than 200 characters"),
        ("(" * 51 + "3" + ")" * 51, "parentheses nested deeper than 50"),  # 103 characters
        ("50 + 25 # comment", "unexpected character '#'"),
    ],
)
def test_unsafe_expressions_rejected_before_evaluation(expression, reason, monkeypatch):
    # What keeps these cheap: the length cap, the nesting cap and the grammar (no "**", no
    # names) reject them in the parser, so nothing is ever computed.
    _never_evaluated(monkeypatch)
    v = verdict(f"#### {expression}", CD)
    assert v.status is Status.unparsed
    assert v.detail == f"countdown: {reason}"
    assert len(v.extracted) <= 203  # long answers are truncated in the verdict


def test_os_command_is_never_executed(tmp_path, monkeypatch):
    _never_evaluated(monkeypatch)
    marker = tmp_path / "pwned"
    v = verdict(f"#### __import__('os').system('touch {marker}')", CD)
    assert v.status is Status.unparsed
    assert v.detail == "countdown: unexpected character '_'"
    assert not marker.exists()


# ------------------------------------------------------------------ knights and knaves


def test_hand_solved_puzzle_has_one_solution():
    assert solve_knights_knaves(KK["people"], KK["statements"]) == [KK_SOLUTION]


def test_claims_and_rendering():
    knights = {"Alice": True, "Bob": False, "Carol": False}
    everyone = ["Alice", "Bob", "Carol"]
    either = [_is("Alice", "knave"), _is("Bob", "knave")]
    assert claim_holds({"op": "or", "claims": either}, knights)
    assert not claim_holds({"op": "and", "claims": either}, knights)
    assert claim_holds({"op": "different", "who": ["Alice", "Bob"]}, knights)
    assert not claim_holds({"op": "same", "who": everyone}, knights)
    assert claim_holds({"op": "at_least_one", "who": everyone, "role": "knight"}, knights)
    assert not claim_holds({"op": "exactly_one", "who": everyone, "role": "knave"}, knights)
    assert claim_holds({"op": "not", "claim": _is("Bob", "knight")}, knights)
    assert render_claim({"op": "not", "claim": _is("Bob", "knight")}) == "Bob is not a knight"
    assert (
        render_claim({"op": "at_least_one", "who": ["Alice", "Bob", "Carol"], "role": "knave"})
        == "at least one of Alice, Bob and Carol is a knave"
    )
    with pytest.raises(ValueError, match="xor"):
        claim_holds({"op": "xor"}, knights)


@pytest.mark.parametrize(
    "answer",
    [
        "Alice: knight, Bob: knave, Carol: knave",
        "bob: KNAVE; Carol: Knave; ALICE: knight",
        "Carol:knave,Alice:knight,Bob:knave.",
    ],
)
def test_kk_correct_in_any_order_and_case(answer):
    v = verdict(f"#### {answer}", KK)
    assert v.status is Status.correct, v.detail


@pytest.mark.parametrize(
    "answer",
    [
        "Alice: knight, Bob: knave, Carol: knight",  # Carol flipped
        "Alice: knave, Bob: knave, Carol: knave",  # Alice flipped
        "Alice: knight, Bob: knight, Carol: knave",  # Bob flipped
    ],
)
def test_kk_one_role_flipped_is_wrong(answer):
    v = verdict(f"#### {answer}", KK)
    assert v.status is Status.wrong and "contradicts" in v.detail


@pytest.mark.parametrize(
    "completion",
    [
        "Alice: knight, Bob: knave, Carol: knave",  # no #### line
        "#### Alice: knight, Bob: knave",  # Carol missing
        "#### Alice: knight, Alice: knight, Bob: knave, Carol: knave",  # duplicate
        "#### Alice: knight, Bob: knave, Carol: knave, Dave: knight",  # not in the puzzle
        # ("liar" and "Alice is a knight" are read since the reward probe: policy in
        # rlvr.rewards.logic; a role word outside ROLE_WORDS or a negation is not)
        "#### Alice: scoundrel, Bob: knave, Carol: knave",
        "#### Alice is not a knave, Bob: knave, Carol: knave",
        "#### " + "Alice: knight, " * 300,
    ],
)
def test_kk_malformed_is_unparsed(completion):
    assert verify_logic(completion, KK).status is Status.unparsed


def test_parse_assignment_names_the_problem():
    with pytest.raises(LogicParseError, match="Carol"):
        parse_assignment("Alice: knight, Bob: knave", KK["people"])
    with pytest.raises(LogicParseError, match="twice"):
        parse_assignment("Alice: knight, alice: knave, Bob: knave, Carol: knave", KK["people"])


# ------------------------------------------------------------------ verifier dispatch


def test_unknown_kind_raises_naming_it():
    with pytest.raises(ValueError, match="sudoku"):
        verify_logic("#### 1", {"kind": "sudoku"})
    with pytest.raises(ValueError):
        verify_logic("#### 1", "75")


def test_registered_with_hash_line_format():
    assert VERIFIERS.get("logic") is verify_logic
    assert VERIFIERS.meta("logic").format_rule == "hash_line"


def test_through_the_reward_pipeline():
    pipeline = RewardPipeline(RewardConfig(workers=0))
    right = pipeline.score("50 + 25 = 75.\n#### 50 + 25", CD, task_type="logic")
    assert right.status is Status.correct and right.reward == pytest.approx(1.1)
    kk = pipeline.score("Case analysis.\n#### Alice: knight, Bob: knave, Carol: knave", KK, "logic")
    assert kk.status is Status.correct and kk.reward == pytest.approx(1.1)
    wrong = pipeline.score("Guess.\n#### 3 * 7", CD, task_type="logic")
    assert wrong.status is Status.wrong and wrong.reward == pytest.approx(0.1)
    error = pipeline.score("#### 1", {"kind": "sudoku"}, task_type="logic")
    assert error.status is Status.error and "sudoku" in error.detail


# ------------------------------------------------------------------ generators


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_generated_solutions_verify(level):
    tasks = generate_logic(level, 200, seed=3)
    assert len(tasks) == 200 and len({t.id for t in tasks}) == 200
    for task in tasks:
        assert task.task_type == "logic" and task.source == "logic"
        assert task.difficulty == level and task.category == LEVELS[level].family
        assert task.solution.splitlines()[-1].startswith("#### ")
        assert verify_logic(task.solution, task.reference).status is Status.correct
        assert Task.from_json(task.to_json()) == task


@pytest.mark.parametrize("level,size", [("countdown-3", 3), ("countdown-4", 4), ("countdown-5", 5)])
def test_countdown_levels_and_targets(level, size):
    for task in generate_logic(level, 100, seed=1):
        ref = task.reference
        assert ref["kind"] == "countdown" and len(ref["numbers"]) == size
        assert isinstance(ref["target"], int) and 10 <= ref["target"] <= 999
        assert ref["target"] not in ref["numbers"]
        assert f"make {ref['target']}." in task.prompt and str(ref["numbers"]) in task.prompt


@pytest.mark.parametrize("level,size", [("kk-2", 2), ("kk-3", 3), ("kk-4", 4)])
def test_kk_levels_unique_solution(level, size):
    for task in generate_logic(level, 200, seed=2):
        ref = task.reference
        assert ref["kind"] == "knights_knaves" and len(ref["people"]) == size
        assert len(ref["statements"]) == size
        solutions = solve_knights_knaves(ref["people"], ref["statements"])
        assert solutions == [task.metadata["solution"]]
        answer = ", ".join(f"{p}: {r}" for p, r in solutions[0].items())
        assert task.solution.endswith(f"#### {answer}")
        assert all(p in task.prompt for p in ref["people"])


def test_deterministic_by_seed():
    a = generate_logic("countdown-4:1,kk-3:1", 50, seed=7)
    b = generate_logic("countdown-4:1,kk-3:1", 50, seed=7)
    c = generate_logic("countdown-4:1,kk-3:1", 50, seed=8)
    assert [t.to_dict() for t in a] == [t.to_dict() for t in b]
    assert [t.id for t in a] != [t.id for t in c]


def test_mixture():
    tasks = generate_logic("countdown-3:0.5,kk-2:0.5", 200, seed=0)
    counts = {c: sum(t.category == c for t in tasks) for c in ("countdown", "knights_knaves")}
    assert 60 < counts["countdown"] < 140 and counts["countdown"] + counts["knights_knaves"] == 200
    assert [lv.name for lv, _ in parse_mixture("kk-4")] == ["kk-4"]
    assert [w for _, w in parse_mixture("kk-2:1,kk-3:3")] == [0.25, 0.75]
    with pytest.raises(KeyError, match="kk-9"):
        parse_mixture("kk-9")
    with pytest.raises(ValueError):
        parse_mixture("kk-2:-1")
    with pytest.raises(ValueError):
        generate_logic("kk-2", 1, seed=0, split="test")


def _split_key(task: Task) -> str:
    ref = task.reference
    if ref["kind"] == "countdown":
        return f"cd|{sorted(ref['numbers'])}|{ref['target']}"
    text = json.dumps(ref["statements"], sort_keys=True)
    for i, name in enumerate(ref["people"]):  # a renamed copy is the same puzzle
        text = text.replace(f'"{name}"', f'"#{i}"')
    return "kk|" + text


def test_train_and_validation_are_disjoint():
    spec = ",".join(LEVELS)
    train = generate_logic(spec, 600, seed=0, split="train")
    val = generate_logic(spec, 300, seed=1, split="validation")
    assert {t.metadata["split"] for t in train} == {"train"}
    assert not {_split_key(t) for t in train} & {_split_key(t) for t in val}
    assert not {t.id for t in train} & {t.id for t in val}
