"""Task types for pipeline tests, loaded through ``RewardConfig.plugins`` so that they exist in
verifier worker processes too."""

import os
import time

from rlvr.rewards.registry import register_format_rule, register_verifier
from rlvr.rewards.types import Status, Verdict


@register_verifier("test_exact", format_rule="answer_tag")
def exact(completion: str, reference, **options) -> Verdict:
    """Correct iff the completion, stripped, equals the reference."""
    answer = completion.strip()
    return Verdict(Status.correct if answer == reference else Status.wrong, answer, "bare")


@register_verifier("test_sleepy")
def sleepy(completion: str, reference, seconds: float = 0.0, **options) -> Verdict:
    """Sleeps ``seconds`` (a verifier that hangs), then says correct."""
    time.sleep(seconds)
    return Verdict(Status.correct, completion, "bare")


@register_verifier("test_crashy")
def crashy(completion: str, reference, **options) -> Verdict:
    """Kills its own process (a verifier that segfaults)."""
    os._exit(3)


@register_verifier("test_raising")
def raising(completion: str, reference, **options) -> Verdict:
    """Raises (a verifier bug)."""
    raise RuntimeError("boom")


@register_verifier("test_returns")
def returns(completion: str, reference, **options):
    """Returns what the completion names: a verifier with a wrong return value."""
    return {"none": None, "bool": True, "nan": Verdict(Status.correct, score=float("nan")),
            "inf": Verdict(Status.wrong, score=float("inf")),
            "big": Verdict(Status.correct, score=2), "status": Verdict("correct"),
            "half": Verdict(Status.wrong, "x", score=0.5),
            "parts": Verdict(Status.correct, "x", components={"rubric/a": 1.0, "rubric/b": 0.25}),
            "bad_parts": Verdict(Status.correct, components={"rubric/a": float("nan")})}[completion]


def slow_starting_worker(conn) -> None:
    """A verifier worker whose process takes 1.5 s to come up (a cold fork server on a busy
    host), then serves as usual."""
    from rlvr.rewards.pool import _worker_main

    time.sleep(1.5)
    _worker_main(conn)


def worker_that_dies_at_start(conn) -> None:
    """A verifier worker process that exits before it is ready."""
    os._exit(4)


@register_verifier("test_scored")
def scored(completion: str, reference, **options) -> Verdict:
    """Returns the status the completion's last line names, with score 1.0: a verifier that
    scores a failed call or a non-answer (the reward probe's kind W)."""
    return Verdict(Status(completion.strip().splitlines()[-1]), score=1.0)


@register_format_rule("test_fmt_raises")
def format_raises(completion: str, **options) -> float:
    """A format rule with a bug."""
    raise RuntimeError("format bug")


@register_format_rule("test_fmt_sleeps")
def format_sleeps(completion: str, seconds: float = 60.0, **options) -> float:
    """A format rule that hangs."""
    time.sleep(seconds)
    return 1.0


@register_format_rule("test_fmt_value")
def format_value(completion: str, **options) -> float:
    """Returns the number the completion's first line writes (a rule with a wrong range)."""
    return float(completion.splitlines()[0])


class InflatedVerdict(Verdict):
    """A verdict whose ``outcome`` property ignores ``score`` (a plugin's subclass)."""

    @property
    def outcome(self) -> float:
        return 1e9


@register_verifier("test_inflated")
def inflated(completion: str, reference, **options) -> Verdict:
    """A wrong answer with a huge outcome (``outcome``) or a huge component (``part``)."""
    if completion == "outcome":
        return InflatedVerdict(Status.wrong, completion, "bare")
    return Verdict(Status.wrong, completion, "bare", components={"bonus": 1e9})
