"""Hostile answers to every reasoning-gym dataset whose scorer evaluates text: they write
files, run commands, read a secret from the environment, connect to a listener of this test,
allocate 1.5 GB, start processes meant to outlive the run, and replace rlvr's verifier
registry. Scored through the reward pipeline (its batch hook and its worker pool), each is
stopped in the sandbox: the host is untouched, nothing of the secret comes back, and the next
rewards (math, reasoning-gym) are what they would have been. Honest answers still score what
reasoning-gym's own ``score_answer`` gives them.

That each payload really reaches the scorer's ``eval`` / ``parse_expr`` is shown first: the
same delivery, scored by reasoning-gym itself in a separate interpreter, creates a file."""

from __future__ import annotations

import json
import os
import resource
import secrets
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

rg = pytest.importorskip("reasoning_gym")

from rlvr.rewards.config import RewardConfig  # noqa: E402
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest  # noqa: E402
from rlvr.rewards.types import Status  # noqa: E402

# Found by an audit hook on compile / exec of string code while scoring (see gym_sandbox).
ANSWER_EVAL = ("binary_matrix", "countdown", "intermediate_integration", "n_queens",
               "polynomial_multiplication", "puzzle24", "simple_integration",
               "spiral_matrix", "string_insertion")
ENTRY_EVAL = ("bitwise_arithmetic", "number_sorting")  # they evaluate the reference's entry
EVALUATING = ANSWER_EVAL + ENTRY_EVAL
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _entry(dataset: str, index: int = 0) -> dict:
    ds = rg.create_dataset(dataset, seed=3, size=index + 1)
    return json.loads(json.dumps(ds[index], default=str))


def deliver(dataset: str, code: str) -> tuple[str, dict]:
    """(answer, entry) that make ``dataset``'s scorer evaluate the Python expression
    ``code``: as the answer, or in the entry for the two datasets that evaluate it."""
    entry = _entry(dataset)
    if dataset == "bitwise_arithmetic":
        entry["metadata"]["problem"] = code
        return "0", entry
    if dataset == "number_sorting":
        entry["answer"] = code
        return "[1]", entry
    return code, entry


def reference(dataset: str, entry: dict) -> dict:
    return {"dataset": dataset, "config": {}, "entry": entry}


def completion(answer: str) -> str:
    return f"Let me work it out.\n<answer>{answer}</answer>"


def test_each_delivery_reaches_the_scorers_evaluation_in_process(tmp_path):
    # reasoning-gym's own scorer, in a throwaway interpreter: the payload creates a file
    cases = {}
    for dataset in EVALUATING:
        marker = tmp_path / f"{dataset}.ran"
        answer, entry = deliver(dataset, f"(open)({str(marker)!r}, 'w').write('x')")
        cases[dataset] = [answer, entry]
    script = textwrap.dedent("""
        import json, sys
        import reasoning_gym as rg
        for name, (answer, entry) in json.loads(sys.stdin.read()).items():
            rg.create_dataset(name, seed=3, size=1).score_answer(answer, entry)
    """)
    subprocess.run([sys.executable, "-c", script], input=json.dumps(cases), text=True,
                   check=True, capture_output=True, timeout=300)
    assert sorted(p.stem for p in tmp_path.glob("*.ran")) == sorted(EVALUATING)


POISON = ("(exec)('import rlvr.rewards.registry as r\\n"
          "from rlvr.rewards.types import Verdict, Status\\n"
          "def f(*a, **k):\\n return Verdict(Status.correct, score=1.0)\\n"
          "for n in (\"math\", \"reasoning_gym\"):\\n r.VERIFIERS.unregister(n)\\n"
          " r.VERIFIERS.add(n, f)', {})")


def test_the_poisoning_answer_poisons_a_process_that_evaluates_it():
    # the registry payload, evaluated by n_queens' scorer in a process with rlvr, makes a
    # wrong math answer "correct" there
    script = textwrap.dedent(f"""
        import reasoning_gym as rg
        from rlvr.rewards.registry import VERIFIERS
        assert str(VERIFIERS.get("math")("#### 4", "5").status) == "wrong"  # as in a worker
        ds = rg.create_dataset("n_queens", seed=3, size=1)
        ds.score_answer({POISON!r}, ds[0])
        print(VERIFIERS.get("math")("#### 4", "5").status)
    """)
    out = subprocess.run([sys.executable, "-c", script], text=True, capture_output=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": SRC})
    assert out.stdout.strip() == "correct", out.stderr[-500:]


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except (OSError, ValueError):
            continue
    return found


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def _exec(source: str) -> str:
    """An expression that runs ``source`` (double quotes only), spelled the way an answer
    would spell it: no dunder, no ``name.attr(`` call outside the string."""
    return f"(exec)({source!r}, {{}})"


def _hostile(tmp_path: Path, port: int, secret_name: str, marker: str) -> dict[str, str]:
    files = {k: str(tmp_path / k) for k in ("open", "pathlib", "shell", "popen", "leak")}
    return {
        "file write": f"(open)({files['open']!r}, 'w').write('pwned')",
        "file write (pathlib)":
            f"__import__('pathlib').Path({files['pathlib']!r}).write_text('pwned')",
        "shell command": _exec(f'import os as o\n(o).system("touch {files["shell"]}")'),
        "subprocess": f"__import__('subprocess').run(['touch', {files['popen']!r}])",
        "secret to a file": _exec(f'import os as o\n(open)("{files["leak"]}", "w")'
                                  f'.write((o).environ.get("{secret_name}", "none"))'),
        "secret in an error": _exec(f'import os as o\nraise ValueError((o).environ.get('
                                    f'"{secret_name}", "none"))'),
        "socket": _exec(f'import socket as s\n(s).create_connection(("127.0.0.1", {port}), 5)'),
        "memory": "len(b'x' * (1500 << 20))",
        "orphan": _exec(f'import subprocess as p\n(p).Popen(["/bin/sh", "-c", '
                        f'"sleep 120; : {marker}"], start_new_session=True)'),
        "orphan (fork)": f"__import__('os').fork() or __import__('os').system("
                         f"'sleep 120; : {marker}')",
        "registry poison": POISON,
    }


@pytest.mark.parametrize("workers", [0, 1])
def test_hostile_answers_leave_the_host_and_later_rewards_alone(tmp_path, listener, workers,
                                                              monkeypatch):
    secret_name, secret = "RLVR_TEST_GYM_SECRET", secrets.token_hex(16)
    monkeypatch.setenv(secret_name, secret)
    marker = f"rlvr-orphan-{secrets.token_hex(6)}"
    payloads = _hostile(tmp_path, listener.getsockname()[1], secret_name, marker)
    datasets = EVALUATING if workers == 1 else ("countdown", "n_queens", "number_sorting")
    requests, honest = [], []
    for dataset in datasets:
        for code in payloads.values():
            answer, entry = deliver(dataset, code)
            requests.append(ScoreRequest(completion(answer), reference(dataset, entry),
                                         "reasoning_gym"))
        entry = _entry(dataset)
        expected = rg.create_dataset(dataset, seed=3, size=1).score_answer(entry["answer"],
                                                                           entry)
        honest.append((ScoreRequest(completion(entry["answer"]), reference(dataset, entry),
                                    "reasoning_gym"), expected))
    peak_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB
    with RewardPipeline(RewardConfig(workers=workers)) as pipeline:
        # one batch: the hostile answers of each dataset, then its honest answer
        results = pipeline.score_batch(requests + [r for r, _ in honest])
        later = pipeline.score_batch(
            [ScoreRequest("so #### 4", "5", "math"), ScoreRequest("so #### 5", "5", "math")]
            + [ScoreRequest("no answer here", r.reference, "reasoning_gym") for r, _ in honest]
            + [ScoreRequest(completion("0"), r.reference, "reasoning_gym") for r, _ in honest]
            + [r for r, _ in honest])
    assert sorted(os.listdir(tmp_path)) == []  # no file, no leaked secret
    with pytest.raises(BlockingIOError):
        listener.accept()
    assert _processes_with(marker) == []
    # the 1.5 GB never existed: no process of the runs (all reaped, so counted) got near it
    if peak_before < (1 << 20):
        assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < (1 << 20)
    hostile, honest_now = results[:len(requests)], results[len(requests):]
    n = len(honest)
    assert [r.status for r in later[:2]] == [Status.wrong, Status.correct]
    assert all(r.status is Status.unparsed for r in later[2:2 + n])
    for result, (_, expected) in zip(honest_now + later[2 + 2 * n:], honest + honest):
        assert result.components["outcome"] == pytest.approx(expected)
        assert result.status == (Status.correct if expected >= 1 else Status.wrong)
    for result, (request, _) in zip(later[2 + n:2 + 2 * n], honest):
        entry = request.reference["entry"]
        ds = rg.create_dataset(request.reference["dataset"], seed=3, size=1)
        assert result.components["outcome"] == pytest.approx(ds.score_answer("0", entry))
    for result, request in zip(hostile, requests):
        assert result.status in (Status.wrong, Status.error, Status.timeout), request
        # 0, or what the scorer gives any unusable answer (countdown: 0.01) where the payload
        # only raised in the sandbox (its environment holds no secret)
        assert result.components["outcome"] <= 0.01 and result.reward <= 0.11, result
        shown = json.dumps([result.detail, result.extracted, result.method])
        assert secret not in shown


def test_an_answer_that_closes_its_pipe_and_lingers_is_a_timeout(monkeypatch):
    from rlvr.rewards import gym_sandbox

    monkeypatch.setattr(gym_sandbox, "ANSWER_WALL_S", 3.0)
    answer, entry = deliver("n_queens", _exec("import os as o\nimport time as t\n"
                                              "(o).closerange(0, 1000)\n(t).sleep(3600)"))
    honest = _entry("n_queens")
    with RewardPipeline(RewardConfig(workers=0)) as pipeline:
        lingering, after = pipeline.score_batch(
            [ScoreRequest(completion(answer), reference("n_queens", entry), "reasoning_gym"),
             ScoreRequest(completion(honest["answer"]), reference("n_queens", honest),
                          "reasoning_gym")])
    assert lingering.status is Status.timeout and lingering.reward == 0.0
    assert after.status is Status.correct
