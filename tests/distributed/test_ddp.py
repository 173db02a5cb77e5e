"""Data-parallel GRPO update (rlvr.distributed.ddp): 2 CPU processes (gloo, accelerate) with
half the rows each give the same update as 1 process with the whole batch.

The two ranks are started with ``torch.multiprocessing`` (spawn), each sets the launcher's
environment (RANK, WORLD_SIZE, ...), initialises the gloo process group and builds
``Accelerator(cpu=True)``, which then wraps the policy in DDP -- the code path a script
started by ``torchrun --nproc_per_node 2`` or by ``accelerate launch --config_file
configs/accelerate/ddp_cpu.yaml`` (with MPI) takes. One spawn runs every case."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from rlvr.algo.loss_agg import micro_batch_weight
from rlvr.algo.objective import policy_objective
from rlvr.distributed.ddp import DataParallelUpdate, ddp_update, global_counts, shard_rows
from rlvr.distributed.update_group import free_port, join_process_group
from rlvr.models.forward import build_sequences, completion_log_probs
from rlvr.models.tiny import tiny_model, tiny_tokenizer
from rlvr.train.batch import TrainBatch
from rlvr.train.config import RunConfig
from rlvr.train.grpo import GRPOStep
from rlvr.train.setup import kl_controller
from rlvr.train.state import ModelState, OptimState, TrainingState

WORLD = 2
MAX_NEW = 8
RTOL, ATOL = 1e-5, 1e-6
AGGS = ("grpo", "dapo", "dr_grpo")
OPTIMS = ("sgd", "adamw")
NO_CLIP = 1e3  # the batch's gradient norms are 0.6 .. 2.6: a wrong scale would not be hidden
# (name, loss_agg, optimizer, rows of the batch used, max_grad_norm); "one_row": rank 1's
# shard is empty; "clip": the (global) gradient norm clip is active
CASES = [(f"{agg}-{opt}", agg, opt, 8, NO_CLIP) for agg in AGGS for opt in OPTIMS]
CASES += [("grpo-sgd-clip", "grpo", "sgd", 8, 0.5), ("one_row", "grpo", "sgd", 1, NO_CLIP)]


def _config(loss_agg: str, max_grad_norm: float = NO_CLIP) -> RunConfig:
    return RunConfig.model_validate({
        "model": {"name": "tiny-random", "precision": "fp32"},  # fp32 for the comparison
        "grpo": {"micro_batch_size": 3, "max_new_tokens": MAX_NEW, "shared_prefix": True,
                 "max_grad_norm": max_grad_norm, "temperature": 1.0},
        "algo": {"loss_agg": loss_agg, "kl_coef": 0.0, "policy_loss": "clip",
                 "clip_eps": 0.2},
    })


def _model_and_optimizer(optim: str):
    model = tiny_model(tiny_tokenizer(), seed=3, hidden_size=32, layers=2).float()
    if optim == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    return model, opt


def _batch():
    """8 rows: 4 prompts of different lengths x 2 completions of lengths 1..6, fixed
    advantages and old log-probs (the initial policy's, perturbed so that the ratio is not 1
    and some tokens are clipped)."""
    tok = tiny_tokenizer()
    texts = ["1+2=", "12*3-4=", "7=", "99-100+1="]
    prompts = [tok(t).input_ids for t in texts for _ in range(2)]
    lengths = torch.tensor([5, 2, 6, 1, 4, 3, 6, 2])
    gen = torch.Generator().manual_seed(11)
    ids = torch.randint(4, len(tok), (8, 6), generator=gen)
    mask = torch.arange(6)[None, :] < lengths[:, None]
    seqs = build_sequences(prompts, ids, mask, tok.pad_token_id)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 1.2, -1.2, 0.7, -0.7])
    model, _ = _model_and_optimizer("sgd")
    with torch.no_grad():
        logp = completion_log_probs(model, seqs, bf16=False)
    old = logp + 0.3 * torch.randn(logp.shape, generator=gen)
    return seqs, adv, old


def _reference(case, seqs, adv, old):
    """The single-process, full-batch update written out directly: one backward of the
    aggregation over all rows, clip, step."""
    _, agg, optim, n, clip = case
    cfg = _config(agg, clip)
    seqs, adv, old = seqs.rows(slice(0, n)).trimmed(), adv[:n], old[:n]
    model, opt = _model_and_optimizer(optim)
    w = seqs.completion_mask.shape[1]
    logp = completion_log_probs(model, seqs, bf16=False, shared_prefix=True)
    options = {"dapo": {"global_token_count": int(seqs.completion_mask.sum())},
               "dr_grpo": {"max_completion_length": MAX_NEW}}.get(agg, {})
    loss = policy_objective(logp, old[:, :w], adv, seqs.completion_mask, loss_agg=agg,
                            loss_agg_options=options, policy_loss_options={"eps": 0.2}).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grpo.max_grad_norm)
    opt.step()
    return model.state_dict()


def _worker(rank: int, world: int, port: int, data: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    accelerator = join_process_group(rank, world, port)
    assert accelerator.num_processes == world and accelerator.process_index == rank
    seqs, adv, old = torch.load(data, weights_only=False)
    results = {}
    for name, agg, optim, n, clip in CASES:
        model, opt = _model_and_optimizer(optim)
        update = DataParallelUpdate(accelerator, model, opt, _config(agg, clip))
        assert isinstance(update.model, torch.nn.parallel.DistributedDataParallel)
        rows = update.shard(n)
        metrics = update(seqs.rows(rows), adv[rows], old[rows])
        state = {k: v.detach().clone() for k, v in update.policy.state_dict().items()}
        results[name] = {"state": state, "metrics": metrics, "rows": (rows.start, rows.stop)}
    torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def batch():
    return _batch()


@pytest.fixture(scope="module")
def ranks(batch, tmp_path_factory):
    """Runs every case on 2 spawned gloo ranks; returns their saved results."""
    import torch.multiprocessing as mp

    tmp = tmp_path_factory.mktemp("ddp")
    data = tmp / "batch.pt"
    torch.save(batch, data)
    t0 = time.perf_counter()
    ctx = mp.spawn(_worker, args=(WORLD, free_port(), str(data), str(tmp)), nprocs=WORLD,
                   join=False)
    deadline = time.monotonic() + 150
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail("data-parallel workers did not finish in 150 s")
    print(f"2-rank spawn: {time.perf_counter() - t0:.1f} s")
    return [torch.load(tmp / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_two_processes_equal_one_process_full_batch(case, batch, ranks):
    name, _, _, n, clip = case
    expected = _reference(case, *batch)
    initial = _model_and_optimizer("sgd")[0].state_dict()
    r0, r1 = ranks[0][name], ranks[1][name]
    assert r0["rows"] == (0, (n + 1) // 2) and r1["rows"] == ((n + 1) // 2, n)
    tokens = int(batch[0].completion_mask[:n].sum())
    for r in (r0, r1):
        assert r["metrics"]["global_rows"] == n and r["metrics"]["global_tokens"] == tokens
        assert r["metrics"]["update_skipped_nonfinite"] == 0.0
        assert (r["metrics"]["grad_norm"] > clip) == (name == "grpo-sgd-clip")
    assert r0["metrics"]["grad_norm"] == r1["metrics"]["grad_norm"]  # the global norm
    moved = 0.0
    for key, want in expected.items():
        # both ranks hold the same weights, bit for bit (DDP averaged identical gradients)
        assert torch.equal(r0["state"][key], r1["state"][key]), key
        torch.testing.assert_close(r0["state"][key], want, rtol=RTOL, atol=ATOL, msg=key)
        moved = max(moved, float((want - initial[key]).abs().max()))
    assert moved > 100 * ATOL  # the update is not vacuous


def test_single_process_ddp_update_matches_grpo_step(batch):
    """Without distribution (world size 1) ddp_update is GRPOStep.update's epoch (mu = 1)."""
    from accelerate import Accelerator

    seqs, adv, _ = batch
    cfg = _config("grpo")
    model, opt = _model_and_optimizer("sgd")
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)
    state = TrainingState(models=ModelState(policy=model),
                          optim=OptimState(opt, schedule, kl=kl_controller(cfg)))
    GRPOStep(cfg).update(state, TrainBatch(train_rows=torch.arange(8), sequences=seqs,
                                           advantages=adv, sampler_log_probs=torch.zeros(8, 6)))
    model2, opt2 = _model_and_optimizer("sgd")
    try:
        accelerator = Accelerator(cpu=True)
        assert accelerator.num_processes == 1
        metrics = ddp_update(model2, opt2, seqs, adv, None, cfg, accelerator)
    finally:  # accelerate's state is a process-wide singleton: leave none behind
        from accelerate.state import AcceleratorState

        AcceleratorState._reset_state(reset_partial_state=True)
    assert metrics["global_rows"] == 8
    for key, want in model.state_dict().items():
        torch.testing.assert_close(model2.state_dict()[key], want, rtol=RTOL, atol=ATOL)


def test_shard_rows_tiles_contiguously():
    for n in range(11):
        for world in (1, 2, 3, 4):
            slices = [shard_rows(n, r, world) for r in range(world)]
            assert [i for s in slices for i in range(n)[s]] == list(range(n))
            sizes = [s.stop - s.start for s in slices]
            assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
    assert shard_rows(8, 1, 2) == slice(4, 8)
    for bad in ((-1, 0, 1), (4, 2, 2), (4, -1, 2), (4, 0, 0)):
        with pytest.raises(ValueError):
            shard_rows(*bad)


def test_weights_sum_to_single_process_weight():
    """Per micro-batch: averaging the W ranks' weights over ranks reproduces GRPOStep's
    single-process accumulation weight with the global counts."""
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1], [1, 0, 0]], dtype=torch.bool)
    rows, tokens = mask.shape[0], int(mask.sum())
    for agg in ("grpo", "bnpo", "dapo", "dr_grpo"):
        for world in (1, 2, 4):
            micro = mask[1:3]
            got = micro_batch_weight(agg, micro, rows, tokens, world) / world
            assert got == pytest.approx(micro_batch_weight(agg, micro, rows, tokens)), (agg, world)
    assert micro_batch_weight("bnpo", mask[:1], rows, tokens, 2) == pytest.approx(2 * 2 / 10)
    with pytest.raises(ValueError, match="world_size"):
        micro_batch_weight("grpo", mask, rows, tokens, 0)
    with pytest.raises(ValueError, match="seq_mean"):
        micro_batch_weight("seq_mean", mask, rows, tokens, 1)


def test_global_counts_identity_without_process_group():
    assert not torch.distributed.is_initialized()
    assert global_counts(3, 17) == (3, 17)
