"""`rlvr verify` on code records mixed with math records: both code reference formats, several
workers, output order, partial credit through --config, and malformed code references."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rlvr.cli import app

runner = CliRunner()


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\n"


# MBPP style: a list of asserts, setup code run after the program (it uses the program's class).
MBPP_REF = {
    "entry_point": "depth",
    "tests": ["assert depth(root) == 3", "assert depth(Node(1)) == 1", "assert depth(None) == 0"],
    "setup_code": "root = Node(1)\nroot.left = Node(2)\nroot.left.left = Node(3)",
}
NODE = ("class Node:\n    def __init__(self, v):\n"
        "        self.v, self.left, self.right = v, None, None\n")
DEPTH_OK = NODE + ("def depth(n):\n    return 0 if n is None else "
                   "1 + max(depth(n.left), depth(n.right))")
DEPTH_CONSTANT = NODE + "def depth(n):\n    return 0 if n is None else 3"  # passes 2 of 3

# HumanEval style: check(candidate) source; the loop makes it run inside the sandbox.
HE_REF = {
    "entry_point": "square",
    "test": "def check(candidate):\n    for i in range(5):\n        assert candidate(i) == i * i\n",
}
# HumanEval style with the prompt: the completion may be just the body.
HE_PROMPT_REF = {
    "entry_point": "twice",
    "prompt": 'def twice(x):\n    """Return 2 * x."""\n',
    "test": "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(-1) == -2\n",
}

ROWS = [
    {"id": "m-ok", "task_type": "math", "completion": "3 + 4 = 7\n#### 7", "reference": "7",
     "category": "math"},
    {"id": "mbpp-ok", "task_type": "code", "completion": fenced(DEPTH_OK),
     "reference": MBPP_REF, "category": "code", "source": "mbpp"},
    {"id": "he-ok", "task_type": "code", "completion": fenced("def square(x):\n    return x * x"),
     "reference": HE_REF, "category": "code", "source": "humaneval"},
    {"id": "m-wrong", "task_type": "math", "completion": "3 + 4 = 8\n#### 8", "reference": "7",
     "category": "math"},
    {"id": "mbpp-wrong", "task_type": "code", "completion": fenced(DEPTH_CONSTANT),
     "reference": MBPP_REF, "category": "code", "source": "mbpp"},
    {"id": "he-body", "task_type": "code", "completion": fenced("    return x + x"),
     "reference": HE_PROMPT_REF, "category": "code", "source": "humaneval"},
    {"id": "he-wrong", "task_type": "code",
     "completion": fenced("def square(x):\n    return x + x"),
     "reference": HE_REF, "category": "code", "source": "humaneval"},
    {"id": "prose", "task_type": "code", "completion": "You should square the number.",
     "reference": HE_REF, "category": "code", "source": "humaneval"},
]
EXPECTED = [  # id, status, reward (outcome 1.0 / 0.0 + 0.1 * format)
    ("m-ok", "correct", 1.1),
    ("mbpp-ok", "correct", 1.1),
    ("he-ok", "correct", 1.1),
    ("m-wrong", "wrong", 0.1),
    ("mbpp-wrong", "wrong", 0.1),
    ("he-body", "correct", 1.0),  # a bare body is not a parsable block: no format credit
    ("he-wrong", "wrong", 0.1),
    ("prose", "unparsed", 0.0),
]


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_verify_mixed_math_and_code_with_two_workers(tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    summary = tmp_path / "summary.json"
    result = runner.invoke(app, ["verify", str(inp), "-o", str(out), "--workers", "2",
                                 "--summary-json", str(summary)])
    assert result.exit_code == 0, result.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(g["id"], g["status"]) for g in got] == [(i, s) for i, s, _ in EXPECTED]
    for g, (_, _, reward) in zip(got, EXPECTED):
        assert g["reward"] == pytest.approx(reward), g
    by_id = {g["id"]: g for g in got}
    assert by_id["mbpp-ok"]["components"] == {"outcome": 1.0, "format": 1.0}
    assert "passed=3/3" in by_id["mbpp-ok"]["detail"]
    assert "passed=2/3" in by_id["mbpp-wrong"]["detail"]  # depth(Node(1)) == 1 fails
    assert by_id["mbpp-ok"]["extracted"].startswith("class Node:")
    assert by_id["he-body"]["method"] == "fenced"
    assert by_id["he-body"]["components"] == {"outcome": 1.0, "format": 0.0}
    assert by_id["prose"]["components"] == {"outcome": 0.0, "format": 0.0}
    assert by_id["he-ok"]["source"] == "humaneval" and by_id["m-ok"]["category"] == "math"
    stats = json.loads(summary.read_text())
    assert stats["by_category"]["code"]["count"] == 6
    assert stats["by_category"]["math"]["correct"] == 0.5


def test_verify_code_partial_credit_from_config(tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", [ROWS[4], ROWS[1], ROWS[0]])
    config = tmp_path / "reward.yaml"
    config.write_text("reward:\n  verifier_options:\n    code: {partial_credit: true}\n")
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["verify", str(inp), "-o", str(out), "--workers", "2",
                                 "--config", str(config)])
    assert result.exit_code == 0, result.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["id"] for g in got] == ["mbpp-wrong", "mbpp-ok", "m-ok"]
    assert got[0]["status"] == "wrong"
    assert got[0]["components"]["outcome"] == pytest.approx(2 / 3, abs=1e-6)
    assert got[0]["reward"] == pytest.approx(2 / 3 + 0.1, abs=1e-6)
    assert got[1]["reward"] == pytest.approx(1.1) and got[2]["reward"] == pytest.approx(1.1)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"task_type": "code", "completion": fenced("def f(): pass"),
          "reference": "assert f() is None"},
         "in.jsonl:3: field 'reference': expected dict, got str"),
        ({"task_type": "code", "completion": fenced("def f(): pass"),
          "reference": ["assert f() is None"]},
         "in.jsonl:3: field 'reference': expected dict, got list"),
        ({"task_type": "code", "completion": fenced("def f(): pass")},
         "in.jsonl:3: missing required field 'reference'"),
        # these were scored as error rows with an internal AttributeError
        ({"task_type": "code", "completion": fenced("def f(): pass"),
          "reference": {"entry_point": "f", "tests": [1, 2]}},
         "in.jsonl:3: field 'reference.tests[0]': expected a string, got int 1"),
        ({"task_type": "code", "completion": fenced("def f(): pass"),
          "reference": {"entry_point": "f", "tests": {"a": 1}}},
         "in.jsonl:3: field 'reference.tests': expected a list of assert strings, got dict"),
        ({"task_type": "code", "completion": fenced("def f(): pass"),
          "reference": {"entry_point": "f", "test": 5}},
         "in.jsonl:3: field 'reference.test': expected a string, got int 5"),
        ({"task_type": "code", "completion": fenced("def f(): pass"),
          "reference": {"entry_point": 3, "tests": ["assert f() is None"]}},
         "in.jsonl:3: field 'reference.entry_point': expected a string, got int 3"),
        ({"task_type": "code", "completion": fenced("def f(): pass"),
          "reference": {"entry_point": "f"}},
         "in.jsonl:3: field 'reference': needs 'tests' (a list of asserts) or 'test'"),
    ],
)
def test_malformed_code_reference_exits_2_naming_line_and_field(tmp_path, bad, message):
    inp = write_jsonl(tmp_path / "in.jsonl", [ROWS[0], ROWS[1], bad, ROWS[2]])
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["verify", str(inp), "-o", str(out), "--workers", "2"])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not out.exists()
