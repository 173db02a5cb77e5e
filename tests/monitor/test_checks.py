"""Each health check on hand-built histories: it fires exactly when its documented rule says
so, with the documented value and threshold (src/rlvr/monitor/checks.py)."""

import dataclasses
import json
from types import SimpleNamespace

import pytest

from rlvr.monitor.checks import HEALTH_CHECKS, CheckContext, CompletionRecord
from rlvr.monitor.config import HealthConfig
from rlvr.monitor.health import HealthMonitor

CFG = HealthConfig()


def ctx(history, rows=(), validation=(), window=10, min_history=5):
    history = [dict(h, step=i + 1) for i, h in enumerate(history)]
    return CheckContext(len(history), history, list(rows), list(validation), window, min_history)


def run(name, context, **overrides):
    cfg = CFG.check_config(name).model_copy(update=overrides)
    return HEALTH_CHECKS[name](context, cfg)


def rec(step=1, category="a", status="wrong", reward=0.0, outcome=0.0, text="x", audit=None,
        difficulty=None, prompt="What is 1 + 1?"):
    return CompletionRecord(step, category, difficulty, status, reward, outcome, text, prompt,
                            audit)


def test_every_check_has_a_config_section():
    assert set(HEALTH_CHECKS) == {"nonfinite", "reward_collapse", "kl_spike", "length_inflation",
                                  "zero_variance", "format_errors", "format_collapse",
                                  "entropy_jump", "verifier_errors", "category_bias",
                                  "validation_collapse",
                                  "degeneration", "reward_hacking", "overfitting",
                                  "off_policy"}
    for name in HEALTH_CHECKS:
        assert CFG.check_config(name).action in ("warn", "stop", "rollback")


@pytest.mark.parametrize("rewards, fires", [
    ([0.6] * 6 + [0.2], True),      # 0.2 < 0.5 x 0.6 and the drop 0.4 >= 0.15
    ([0.6] * 6 + [0.35], False),    # 0.35 > 0.30
    ([0.1] * 6 + [0.0], False),     # halved, but only 0.1 of reward: below min_drop
    ([0.6] * 3 + [0.1], False),     # 3 steps of history < min_history 5
])
def test_reward_collapse(rewards, fires):
    finding = run("reward_collapse", ctx([{"reward_mean": r} for r in rewards]))
    assert (finding is not None) == fires
    if fires:
        assert finding.value == 0.2 and finding.threshold == pytest.approx(0.3)
        assert "fell to 0.200 from 0.600" in finding.message


def _mixed_rows(current_hard: int, current_reward_hard: float, current_reward_easy: float):
    """Six earlier steps of 4 easy (reward 0.9) and 4 hard (0.1) completions, then a step of
    ``current_hard`` hard completions and 8 - current_hard easy ones."""
    rows = [rec(step=s, category=c, reward=r) for s in range(1, 7)
            for c, r in [("easy", 0.9)] * 4 + [("hard", 0.1)] * 4]
    rows += [rec(step=7, category="hard", reward=current_reward_hard)] * current_hard
    rows += [rec(step=7, category="easy", reward=current_reward_easy)] * (8 - current_hard)
    means = [0.5] * 6 + [_mean_of(rows[-8:])]
    return means, rows


def _mean_of(rows):
    return sum(r.reward for r in rows) / len(rows)


def test_reward_collapse_expects_the_steps_categories():
    # a step that drew 8 hard problems scores 0.1, as hard problems did before: no collapse
    # (the plain rule would see 0.1 < 0.5 x 0.5 after a mean of 0.5)
    means, rows = _mixed_rows(8, 0.1, 0.9)
    assert run("reward_collapse", ctx([{"reward_mean": m} for m in means], rows)) is None
    plain = ctx([{"reward_mean": m} for m in means])  # without completions: the plain rule
    assert run("reward_collapse", plain) is not None
    # the easy problems fall from 0.9 to 0.2 on a half-and-half step: expected 0.5, got 0.15
    means, rows = _mixed_rows(4, 0.1, 0.2)
    finding = run("reward_collapse", ctx([{"reward_mean": m} for m in means], rows))
    assert finding is not None and finding.value == pytest.approx(0.15)
    assert finding.threshold == pytest.approx(0.25)
    assert "from 0.500 (what the previous 6 steps scored on this step's categories)" in \
        finding.message


def _two_prompt_steps(low_steps: int):
    """Six steps of 2 prompts x 8 completions, one prompt solved 2 times in 8 and the other 6
    (group means 0.25 and 0.75, step mean 0.5), then ``low_steps`` steps scoring 0."""
    rows = [rec(step=s, prompt=q, reward=float(i < solved)) for s in range(1, 7)
            for q, solved in (("easy?", 6), ("hard?", 2)) for i in range(8)]
    rows += [rec(step=s, prompt=q) for s in range(7, 7 + low_steps) for q in ("a?", "b?")
             for _ in range(8)]
    return [{"reward_mean": 0.5}] * 6 + [{"reward_mean": 0.0}] * low_steps, rows


def test_reward_collapse_needs_a_fall_beyond_the_luck_of_the_draw():
    # the earlier groups' means 0.25 / 0.75: sample sd 0.25 * sqrt(12 / 11) = 0.2611
    spread = 0.25 * (12 / 11) ** 0.5
    history, rows = _two_prompt_steps(1)
    # one step of 2 groups at 0 after 0.5: 0.5 / (0.2611 / sqrt 2) = 2.71 standard errors < 3
    assert 0.5 / (spread / 2 ** 0.5) == pytest.approx(2.708, abs=1e-3)
    assert run("reward_collapse", ctx(history, rows)) is None
    assert run("reward_collapse", ctx(history, rows), min_z=0.0) is not None  # the plain rule
    # a second step at 0: base (6 x 0.5 + 0) / 7, its fall over the 4 groups of both low steps
    history, rows = _two_prompt_steps(2)
    base = 3 / 7
    assert base / (spread / 4 ** 0.5) == pytest.approx(3.283, abs=1e-3)
    finding = run("reward_collapse", ctx(history, rows))
    assert finding is not None and finding.threshold == pytest.approx(base / 2)
    assert run("reward_collapse", ctx(history, rows), min_z=3.5) is None


@pytest.mark.parametrize("kls, fires", [
    ([0.01] * 6 + [0.08], True),    # > 5 x 0.01 and > min_kl 0.05
    ([0.01] * 6 + [0.04], False),   # 4x and below min_kl
    ([0.5] * 6 + [1.5], True),      # above max_kl 1.0 whatever the history
    ([0.01] * 2 + [0.08], False),   # too little history for the relative rule
])
def test_kl_spike(kls, fires):
    assert (run("kl_spike", ctx([{"kl": k} for k in kls])) is not None) == fires


def test_kl_spike_is_silent_without_a_kl_term():
    assert run("kl_spike", ctx([{"reward_mean": 0.5}] * 8)) is None


@pytest.mark.parametrize("lengths, truncation, fires", [
    ([10, 10, 10, 20, 25], [0] * 5, "growing"),      # recent 22.5 > 1.5 x 10, rising
    ([10, 10, 10, 20, 16], [0] * 5, None),           # long but falling
    ([10, 10, 10, 11, 12], [0] * 5, None),           # rising slowly: 11.5 < 15
    ([10] * 5, [0, 0, 0, 0.5, 0.5], "length cap"),   # 33% truncated vs 0% at the start
    ([10] * 5, [0.3] * 5, None),                     # always 30%: not a change
])
def test_length_inflation(lengths, truncation, fires):
    history = [{"length_mean": x, "truncation_rate": t} for x, t in zip(lengths, truncation)]
    finding = run("length_inflation", ctx(history, window=3, min_history=2))
    assert (finding and fires in finding.message) if fires else finding is None


def test_zero_variance_constant_reward_and_fraction_by_tier():
    constant = [{"reward_std": 0.3, "reward_mean": .5, "zero_variance_fraction": 0.2},
                {"reward_std": 0.0, "reward_mean": 0.0, "zero_variance_fraction": 1.0},
                {"reward_std": 0.0, "reward_mean": 0.0, "zero_variance_fraction": 1.0}]
    finding = run("zero_variance", ctx(constant))
    assert "reward 0 for 2 steps in a row" in finding.message
    assert run("zero_variance", ctx(constant[:2])) is None  # only one constant step so far
    high = [{"reward_std": 0.2, "zero_variance_fraction": f} for f in (0.95, 0.9, 0.92)]
    high[-1].update({"zero_variance_fraction/easy": 1.0, "zero_variance_fraction/hard": 0.84})
    finding = run("zero_variance", ctx(high))
    assert finding.value == pytest.approx(0.9233, abs=1e-4)
    assert "by tier: easy 100%, hard 84%" in finding.message
    low = [{"reward_std": 0.2, "zero_variance_fraction": f} for f in (0.5, 0.9, 0.9)]
    assert run("zero_variance", ctx(low)) is None  # mean 0.77 < 0.9


@pytest.mark.parametrize("last, fires", [(0.5, True), (0.3, False)])
def test_format_errors(last, fires):
    history = [{"format_error_rate": 0.1}] * 5 + [{"format_error_rate": last}]
    finding = run("format_errors", ctx(history))
    assert (finding is not None) == fires  # 0.5 > 0.1 + 0.25 and >= 0.3; 0.3 is not


@pytest.mark.parametrize("rates, fires", [
    ([0.5, 1.0], True),           # one step of history is enough: >= 0.9 and 0.5 above 0.5
    ([0.5, 0.4, 0.94], True),     # 0.94 >= 0.9, mean 0.45 + 0.4 <= 0.94
    ([0.5, 0.8125], False),       # a noisy step of the healthy smoke run: below 0.9
    ([0.6, 0.95], False),         # rise 0.35 < 0.4
    ([0.95, 1.0], False),         # a policy that never had the format: no collapse
    ([1.0], False),               # no history: the first step is the baseline
])
def test_format_collapse(rates, fires):
    """The exploding smoke run (grpo.learning_rate=1e3): 50% -> 100% format errors at step 2,
    when no row trains and KL is not measured."""
    rows = [rec(step=len(rates), status="unparsed", text="7 7 7 7")]
    finding = run("format_collapse", ctx([{"format_error_rate": r} for r in rates], rows))
    assert (finding is not None) == fires
    if fires:
        assert finding.value == rates[-1] and "answer format collapsed" in finding.message
        assert finding.examples == ["7 7 7 7"]


@pytest.mark.parametrize("entropies, fires", [
    ([1.53, 4.43], True),         # the exploding smoke run at step 2 (nats/token)
    ([1.5, 1.6, 3.3], True),      # > 2 x 1.55 and 1.75 above it
    ([1.53, 1.78], False),        # the healthy smoke run's largest step-to-step change
    ([0.2, 0.9], False),          # 4.5x, but only 0.7 nats/token: below min_rise
    ([4.4], False),               # no history
])
def test_entropy_jump(entropies, fires):
    finding = run("entropy_jump", ctx([{"rollout_entropy": e} for e in entropies]))
    assert (finding is not None) == fires
    if fires:
        assert finding.value == entropies[-1] and "entropy jumped" in finding.message


@pytest.mark.parametrize("before, now, fires", [
    ({"pass_at_1": 0.0, "format_rate": 1.0}, {"pass_at_1": 0.0, "format_rate": 0.0}, True),
    ({"pass_at_1": 0.49, "format_rate": 1.0}, {"pass_at_1": 0.2, "format_rate": 0.97}, True),
    ({"pass_at_1": 0.49, "format_rate": 1.0}, {"pass_at_1": 0.3, "format_rate": 0.9}, False),
    ({"pass_at_1": 0.3, "format_rate": 0.3}, {"pass_at_1": 0.12, "format_rate": 0.12}, False),
    ({"pass_at_1": 0.5}, {"pass_at_1": 0.1}, True),   # rows without format_rate (old state)
])
def test_validation_collapse(before, now, fires):
    vals = [dict(before, step=0, label="before_grpo", n=200),
            dict(now, step=2, label="grpo", n=200)]
    finding = run("validation_collapse", ctx([{"reward_mean": 0.1}] * 2, validation=vals))
    assert (finding is not None) == fires
    if fires:
        assert "collapsed to" in finding.message and "before GRPO (step 0)" in finding.message
    # judged at a validation step only
    assert run("validation_collapse", ctx([{"reward_mean": 0.1}] * 3, validation=vals)) is None


def test_validation_collapse_needs_enough_tasks_to_tell_a_fall_from_chance():
    # 2 held-out tasks, both right before GRPO and both wrong now: adjusted shares 3/4 and 1/4,
    # standard error sqrt(2 x 3/16 / 4) = 0.306, a fall of 1.63 standard errors (< 3)
    vals = [{"step": 0, "label": "before_grpo", "n": 2, "pass_at_1": 1.0},
            {"step": 2, "label": "grpo", "n": 2, "pass_at_1": 0.0}]
    history = [{"reward_mean": 0.1}] * 2
    assert run("validation_collapse", ctx(history, validation=vals)) is None
    assert run("validation_collapse", ctx(history, validation=vals), min_z=0.0) is not None
    # 20 tasks from 60% to 0%: adjusted 13/22 and 1/22, 4.79 standard errors
    vals = [dict(vals[0], n=20, pass_at_1=0.6), dict(vals[1], n=20, pass_at_1=0.0)]
    assert run("validation_collapse", ctx(history, validation=vals)) is not None
    assert run("validation_collapse", ctx(history, validation=vals), min_z=4.8) is None


@pytest.mark.parametrize("errors, timeouts, fires", [(3, 1, True), (2, 1, False), (0, 0, False)])
def test_verifier_errors(errors, timeouts, fires):
    """Error and timeout rows of the current step only; 4 of 32 = 12.5% > 10%, 3 = 9.4% not."""
    current = ([rec(step=2, status="error", text="boom")] * errors
               + [rec(step=2, status="timeout")] * timeouts)
    current += [rec(step=2, status="correct")] * (32 - len(current))
    earlier = [rec(step=1, status="error")] * 32  # last step's failures do not count now
    finding = run("verifier_errors", ctx([{}, {}], rows=earlier + current))
    assert (finding is not None) == fires
    if fires:
        assert finding.value == pytest.approx(4 / 32) and finding.threshold == 0.1
        assert "(4 of 32) got a verifier error or timeout" in finding.message
        assert finding.examples[0] == "boom"


def _category_rows(a_unparsed, b_unparsed, n=40, a_solves=True):
    """n completions per category; the first k unparsed, the rest correct (category a's
    rest wrong when not ``a_solves``)."""
    def rows(cat, k, solves):
        return [rec(category=cat, status="unparsed" if i < k else
                    ("correct" if solves else "wrong"),
                    outcome=float(i >= k and solves)) for i in range(n)]
    return rows("a", a_unparsed, a_solves) + rows("b", b_unparsed, True)


def test_category_bias_parse_gap():
    finding = run("category_bias", ctx([{}], rows=_category_rows(20, 2)))
    # parse failures 50% vs 5%: gap 0.45 >= 0.3 (zero-reward gap is the same 0.45 < 0.6)
    assert finding.value == 0.5 and finding.threshold == pytest.approx(0.05 + 0.3)
    assert "category 'a': parse-failure rate 50%" in finding.message and "vs 5%" in finding.message
    assert all(e.startswith("[unparsed]") for e in finding.examples)
    assert "over step 1 vs" in finding.message  # every row is step 1's, whatever the window
    rows = [dataclasses.replace(r, step=1 + i % 3) for i, r in enumerate(_category_rows(20, 2))]
    assert "over the last 3 steps vs" in run("category_bias", ctx([{}], rows=rows)).message
    assert run("category_bias", ctx([{}], rows=_category_rows(10, 2))) is None  # gap 0.2
    assert run("category_bias", ctx([{}], rows=_category_rows(20, 2, n=20))) is None  # < 32


def test_category_bias_zero_reward_gap_and_single_category():
    rows = _category_rows(0, 0, a_solves=False)  # a: all wrong, b: all right: gap 1.0
    finding = run("category_bias", ctx([{}], rows=rows))
    assert "category 'a': zero-reward rate 100%" in finding.message
    assert run("category_bias", ctx([{}], rows=[r for r in rows if r.category == "a"])) is None


def test_degeneration_names_the_metric_and_shows_the_worst_completions():
    loop = "The answer is 5. " * 20
    rows = [rec(text="3 + 4 = 7\n#### 7"), rec(text=loop)]
    finding = run("degeneration", ctx([{"repetition_rate": 0.5, "garbled_rate": 0.0,
                                        "script_mix_rate": 0.0}], rows=rows))
    assert "repeated 4-grams" in finding.message and finding.value == 0.5
    assert finding.examples[0].startswith("The answer is 5.")
    mixed = [rec(text="ответ равен семь"), rec(text="7")]
    finding = run("degeneration", ctx([{"repetition_rate": 0.0, "garbled_rate": 0.0,
                                        "script_mix_rate": 0.5}], rows=mixed))
    assert "outside the prompt's script" in finding.message
    assert finding.examples[0] == "ответ равен семь"
    assert run("degeneration", ctx([{"repetition_rate": 0.1, "garbled_rate": 0.0,
                                     "script_mix_rate": 0.0}])) is None


def test_reward_hacking_audit_share_over_the_window():
    rows = [rec(reward=1.0, outcome=1.0, audit="correct") for _ in range(7)]
    rows += [rec(reward=1.0, outcome=1.0, audit="wrong", text="3 4 5 6 7") for _ in range(3)]
    finding = run("reward_hacking", ctx([{}], rows=rows))
    assert finding.value == pytest.approx(0.3) and "rejects 30%" in finding.message
    assert finding.examples[0] == "[reward 1, own verifier: wrong] 3 4 5 6 7"
    assert run("reward_hacking", ctx([{}], rows=rows[3:])) is None  # 7 audited < 8


def test_reward_hacking_reward_up_validation_flat():
    history = [{"reward_mean": r} for r in (0.2, 0.2, 0.2, 0.2, 0.4, 0.5, 0.5, 0.5)]
    flat = [{"step": 0, "pass_at_1": 0.3}, {"step": 4, "pass_at_1": 0.3},
            {"step": 8, "pass_at_1": 0.3}]
    finding = run("reward_hacking", ctx(history, validation=flat, window=4))
    # reward over steps 5-8 (0.475) minus steps 1-4 (0.2) = +0.275 >= 0.1; pass@1 +0.0
    assert finding.value == pytest.approx(0.275)
    assert "between steps 4 and 8" in finding.message
    rising = flat[:2] + [{"step": 8, "pass_at_1": 0.35}]
    assert run("reward_hacking", ctx(history, validation=rising, window=4)) is None
    stale = flat[:2]  # no validation at the current step: not judged
    assert run("reward_hacking", ctx(history, validation=stale, window=4)) is None


@pytest.mark.parametrize("scores, fires", [
    ([0.4, 0.6, 0.5], True),    # rose to 0.6, fell 0.1 > 0.05
    ([0.4, 0.6, 0.58], False),  # fell 0.02
    ([0.6, 0.5, 0.4], False),   # never rose above the first point
])
def test_overfitting(scores, fires):
    vals = [{"step": 4 * i, "pass_at_1": s} for i, s in enumerate(scores)]
    history = [{"reward_mean": 0.5}] * 8
    assert (run("overfitting", ctx(history, validation=vals)) is not None) == fires


def test_nonfinite_counts_the_run_and_forces_stop_at_the_limit():
    history = [{"update_skipped_nonfinite": x, "nonfinite_log_probs": x}
               for x in (0.0, 1.0, 1.0, 1.0)]
    finding = run("nonfinite", ctx(history))
    assert finding.force_action == "stop" and finding.value == 3
    assert "non-finite log_probs" in finding.message
    finding = run("nonfinite", ctx(history[:2]))
    assert finding.force_action is None and "1 in a row" in finding.message
    assert run("nonfinite", ctx(history[:1])) is None


# -- the monitor ---------------------------------------------------------------------------------
def _monitor(tmp_path, **updates):
    return HealthMonitor(HealthConfig(**updates), tmp_path, print_fn=lambda *_: None)


BASE = {"reward_mean": 0.6, "reward_std": 0.1, "zero_variance_fraction": 0.0,
        "length_mean": 10, "truncation_rate": 0.0, "format_error_rate": 0.0}


def test_cooldown_and_rollback_limit(tmp_path):
    monitor = _monitor(tmp_path, cooldown=2, max_rollbacks=1, min_history=1,
                       repeat_rollback="rollback")
    base = BASE
    monitor.check(1, base)
    alerts = monitor.check(2, dict(base, format_error_rate=0.5))
    assert [(a.check, a.action) for a in alerts] == [("format_errors", "warn")]
    assert monitor.check(3, dict(base, format_error_rate=0.6)) == []  # cooling down (2 steps)
    alerts = monitor.check(4, dict(base, reward_mean=0.1))
    assert [(a.check, a.action) for a in alerts] == [("reward_collapse", "rollback")]
    monitor.after_rollback(4)
    monitor.check(5, base)
    alerts = monitor.check(6, dict(base, reward_mean=0.1))  # a rollback ends the cooldown
    assert alerts[0].action == "stop" and "rollback limit 1 reached" in alerts[0].message
    logged = [json.loads(x) for x in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert [(a["step"], a["action"]) for a in logged] == [(2, "warn"), (4, "rollback"),
                                                          (6, "stop")]


def _exploding(monitor, step):
    """The exploding smoke run's signals at ``step``: format 100% wrong, entropy 4.4."""
    return monitor.check(step, dict(BASE, format_error_rate=1.0, rollout_entropy=4.4))


def _healthy(monitor, step):
    return monitor.check(step, dict(BASE, format_error_rate=0.5, rollout_entropy=1.5))


def test_a_repeated_rollback_to_the_same_state_stops_the_run(tmp_path):
    """the policy breaks at step 2, is rolled back to step-000000 with the
    learning rate halved, breaks again at step 4; a rollback now would restore step-000000
    again (or step-000002, written after the rollback: no newer state), so the run stops
    and says why, instead of cooling down and ending with exit 0."""
    for target in (("step-000000", 0), ("step-000002", 2)):
        monitor = _monitor(tmp_path / target[0])
        monitor.rollback_target = lambda step, t=target: t
        _healthy(monitor, 1)
        alerts = _exploding(monitor, 2)
        assert {a.check for a in alerts} == {"format_collapse", "entropy_jump"}
        assert all(a.action == "rollback" for a in alerts)
        monitor.after_rollback(2, "format_collapse", "step-000000", 0, 500.0)
        _healthy(monitor, 3)
        alerts = _exploding(monitor, 4)
        assert [a.action for a in alerts] == ["stop", "stop"]
        assert (f"the policy broke again after the rollback at step 2 to step-000000 with the "
                f"learning rate lowered to 500; a rollback now would restore {target[0]}, no "
                f"newer than that state: stopping") in alerts[0].message
        assert monitor.rollback_log == [{"step": 2, "check": "format_collapse",
                                         "to": "step-000000", "to_step": 0, "lr": 500.0}]


def test_a_rollback_to_a_newer_state_or_repeat_rollback_rollback_lowers_the_lr_again(tmp_path):
    monitor = _monitor(tmp_path / "newer")
    monitor.rollback_target = lambda step: ("step-000004", 4)  # trained past the rollback
    _healthy(monitor, 1)
    _exploding(monitor, 2)
    monitor.after_rollback(2, "format_collapse", "step-000000", 0, 500.0)
    _healthy(monitor, 3)
    assert {a.action for a in _exploding(monitor, 4)} == {"rollback"}
    monitor = _monitor(tmp_path / "again", repeat_rollback="rollback")
    monitor.rollback_target = lambda step: ("step-000000", 0)
    _healthy(monitor, 1)
    _exploding(monitor, 2)
    monitor.after_rollback(2, "format_collapse", "step-000000", 0, 500.0)
    _healthy(monitor, 3)
    assert {a.action for a in _exploding(monitor, 4)} == {"rollback"}
    monitor.after_rollback(4, "format_collapse", "step-000000", 0, 250.0)
    _healthy(monitor, 5)
    alerts = _exploding(monitor, 6)  # max_rollbacks 2
    assert {a.action for a in alerts} == {"stop"}
    assert "rollback limit 2 reached" in alerts[0].message
    state = json.loads(json.dumps(monitor.state_dict()))
    other = _monitor(tmp_path / "again")
    other.load_state_dict(state)
    assert other.rollback_log == monitor.rollback_log and len(other.rollback_log) == 2


def test_state_round_trips_through_json_and_spot_check_is_top_k(tmp_path):
    monitor = _monitor(tmp_path, spot_check_top_k=2)
    monitor.rows = [rec(reward=r, text=f"t{r}") for r in (0.1, 1.1, 0.5)]
    monitor.check(1, {"reward_mean": 0.5})
    state = json.loads(json.dumps(monitor.state_dict()))
    other = _monitor(tmp_path)
    other.load_state_dict(state)
    assert other.rows == monitor.rows and other.history == monitor.history
    path = monitor.spot_check(1)
    assert [json.loads(x)["text"] for x in path.read_text().splitlines()] == ["t1.1", "t0.5"]


def test_observe_computes_per_category_and_per_tier_metrics(tmp_path):
    import torch

    from rlvr.records import Task
    from rlvr.rewards.types import RewardResult, Status

    tasks = [Task("1", "What is 1 + 1?", "2", "math", "t", difficulty="easy", category="add"),
             Task("2", "What is 9 * 9?", "81", "math", "t", difficulty="hard", category="mul")]
    texts = ["#### 2", "#### 2", "#### 80", "no answer"]
    results = [RewardResult(1.1, {"outcome": 1.0, "format": 1.0}, Status.correct),
               RewardResult(1.1, {"outcome": 1.0, "format": 1.0}, Status.correct),
               RewardResult(0.1, {"outcome": 0.0, "format": 1.0}, Status.wrong),
               RewardResult(0.0, {"outcome": 0.0, "format": 0.0}, Status.unparsed)]
    batch = SimpleNamespace(tasks=tasks, texts=texts, results=results,
                            rollout=SimpleNamespace(prompt_index=torch.tensor([0, 0, 1, 1])),
                            zero_variance=torch.tensor([True, False]))  # 1.1/1.1 and 0.1/0.0
    m = _monitor(tmp_path).observe(1, batch)
    assert m["reward_mean/add"] == pytest.approx(1.1)
    assert m["reward_mean/mul"] == pytest.approx(0.05)
    assert m["reward_std/mul"] == pytest.approx(0.0707107, abs=1e-6)
    assert m["parse_failure_rate/mul"] == 0.5 and m["parse_failure_rate/add"] == 0.0
    assert m["zero_variance_fraction/easy"] == 1.0 and m["zero_variance_fraction/hard"] == 0.0
    assert m["gaming_rate"] == 0.25  # the formatted wrong answer earned format-only reward
    assert "audit_credited" not in m  # no audit pipeline
