"""The ``off_policy`` health check (src/rlvr/monitor/off_policy.py): it fires exactly when the
step's sampler / trainer gap or the corrections' masked fraction passes its threshold, with
those numbers in the alert."""

import pytest

from rlvr.monitor.checks import HEALTH_CHECKS, CheckContext
from rlvr.monitor.config import HealthConfig

CFG = HealthConfig().off_policy


def _ctx(row: dict) -> CheckContext:
    return CheckContext(1, [dict(row, step=1)], [], [], 10, 5)


@pytest.mark.parametrize("row, value, threshold", [
    ({"rollout_logprob_gap": 2e-6}, None, None),              # fp32: the same function
    ({"rollout_logprob_gap": 0.15, "is_masked_fraction": 0.01}, None, None),  # int8 + MIS
    ({"rollout_logprob_gap": 0.31}, 0.31, 0.3),               # not sampling this policy
    ({"rollout_logprob_gap": 0.01, "is_masked_fraction": 0.25}, 0.25, 0.1),
    ({}, None, None),                                         # no sampler log-probs
])
def test_fires_past_the_defaults(row, value, threshold):
    finding = HEALTH_CHECKS["off_policy"](_ctx(row), CFG)
    if value is None:
        assert finding is None
        return
    assert (finding.value, finding.threshold) == (value, threshold)
    assert ("nats/token" in finding.message) == ("is_masked_fraction" not in row)


def test_thresholds_are_configurable():
    cfg = CFG.model_copy(update={"max_logprob_gap": 1e-3, "max_masked_fraction": 0.5})
    finding = HEALTH_CHECKS["off_policy"](_ctx({"rollout_logprob_gap": 0.01}), cfg)
    assert finding.value == 0.01 and finding.threshold == 1e-3
    assert HEALTH_CHECKS["off_policy"](_ctx({"is_masked_fraction": 0.25}), cfg) is None
    assert CFG.action == "warn"
