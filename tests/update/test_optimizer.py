"""The policy's optimizer (fused AdamW) and the huge-page setting rlvr asks of torch."""

import os
import subprocess
import sys

import pytest
import torch

from rlvr.update.optimizer import adamw


def _steps(optimizer, params, grads, steps=3):
    for _ in range(steps):
        for p, g in zip(params, grads):
            p.grad = g.clone()
        optimizer.step()
    return [p.detach().clone() for p in params]


def test_adamw_is_fused_and_matches_the_single_tensor_update():
    g = torch.Generator().manual_seed(0)
    start = [torch.randn(7, 5, generator=g), torch.randn(5, generator=g)]
    grads = [torch.randn(t.shape, generator=g) for t in start]
    fused_params = [t.clone().requires_grad_() for t in start]
    plain_params = [t.clone().requires_grad_() for t in start]
    fused = adamw(fused_params, lr=1e-2, weight_decay=0.1)
    plain = torch.optim.AdamW(plain_params, lr=1e-2, weight_decay=0.1, foreach=False)
    assert fused.defaults["fused"] is True
    got, want = _steps(fused, fused_params, grads), _steps(plain, plain_params, grads)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    # AdamW moved every weight: lr * (m_hat / sqrt(v_hat)) ~ lr per step, plus decay
    assert all(float((a - s).abs().min()) > 1e-3 for a, s in zip(got, start))


def test_adamw_falls_back_where_the_fused_kernel_does_not_apply():
    params = [torch.zeros(3, dtype=torch.float64, requires_grad=True)]
    assert not adamw(params, lr=1e-3).defaults["fused"]


def _thp_setting(code: str, env: dict) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize(("code", "given", "expected"), [
    ("import rlvr, os; print(os.environ.get('THP_MEM_ALLOC_ENABLE'))", None, "1"),
    ("import rlvr, os; print(os.environ.get('THP_MEM_ALLOC_ENABLE'))", "0", "0"),
    # torch imported first has already read its setting: rlvr leaves the environment alone
    ("import torch, rlvr, os; print(os.environ.get('THP_MEM_ALLOC_ENABLE'))", None, "None"),
])
def test_importing_rlvr_first_asks_torch_for_huge_pages(code, given, expected):
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    if given is not None:
        env["THP_MEM_ALLOC_ENABLE"] = given
    assert _thp_setting(code, env) == expected
