"""A small ``verifiers`` environment module for the tests (no hub download):
``load_environment(n=..., kind=...)`` builds sums ``a + b`` with a ``#### N`` answer line,
a parser that reads it and a rubric of one sync and one async reward function, weighted
0.8 / 0.2. ``kind="multi"`` / ``"tool"`` build the multi-turn and tool variants (refused as a data
source, played through ``env: {source: verifiers}``);
``kind="group"`` adds a group reward function; ``eval_n`` adds an eval dataset."""

from __future__ import annotations

import verifiers as vf
from datasets import Dataset

SYSTEM = "Answer with a final line '#### <number>'."


def final_number(text: str) -> str | None:
    """The text after the last '####', stripped; None without one."""
    return text.rsplit("####", 1)[1].strip() if "####" in text else None


def correct_answer(parser, completion, answer, **kwargs) -> float:
    """1.0 iff the parsed answer equals the row's answer."""
    return 1.0 if parser.parse_answer(completion) == answer else 0.0


async def brevity(completion, **kwargs) -> float:
    """An async reward: 1.0 for a reply of at most 40 characters, 0.5 up to 200, else 0."""
    text = completion[-1]["content"] if isinstance(completion, list) else completion
    text = text if isinstance(text, str) else getattr(completion[-1], "content", "")
    return 1.0 if len(text) <= 40 else 0.5 if len(text) <= 200 else 0.0


def group_diversity(completions, **kwargs) -> list[float]:
    """A group reward function (scores the whole group): rlvr refuses it."""
    return [1.0] * len(completions)


def _rows(n: int, offset: int = 0) -> Dataset:
    pairs = [(3 + i, 7 * i % 50 + offset) for i in range(n)]
    return Dataset.from_list([{"question": f"What is {a} + {b}?", "answer": str(a + b),
                               "info": {"a": a, "b": b}} for a, b in pairs])


class _Echo(vf.MultiTurnEnv):
    async def env_response(self, messages, state, **kwargs):
        return [{"role": "user", "content": "Again."}]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def load_environment(n: int = 20, eval_n: int = 0, kind: str = "single",
                     weights: tuple = (0.8, 0.2)) -> vf.Environment:
    parser = vf.Parser(extract_fn=final_number)
    funcs = [correct_answer, brevity] + ([group_diversity] if kind == "group" else [])
    rubric = vf.Rubric(funcs=funcs, weights=list(weights) + [0.0] * (len(funcs) - 2),
                       parser=parser)
    extra = {"eval_dataset": _rows(eval_n, offset=100)} if eval_n else {}
    if kind == "multi":
        return _Echo(dataset=_rows(n), system_prompt=SYSTEM, parser=parser, rubric=rubric,
                     max_turns=3, **extra)
    if kind == "tool":
        return vf.ToolEnv(dataset=_rows(n), system_prompt=SYSTEM, parser=parser,
                          rubric=rubric, tools=[add], **extra)
    return vf.SingleTurnEnv(dataset=_rows(n), system_prompt=SYSTEM, parser=parser,
                            rubric=rubric, **extra)
