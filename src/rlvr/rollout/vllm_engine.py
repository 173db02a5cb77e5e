"""``vllm``: rollouts on a CUDA GPU through vLLM's offline ``vllm.LLM`` (optional extra:
``pip install 'rlvr[vllm]'``). Importing this module never imports vLLM: it is imported when an
engine is built.

Generation: one ``LLM.generate`` call per ``generate``, prompts given as token ids
(``{"prompt_token_ids": ids}``, i.e. a ``vllm.inputs.TokensPrompt``; the form every vLLM since
0.4.2 accepts, old V0 engine and V1 alike, whereas the ``prompt_token_ids=`` keyword was
deprecated in 0.4.2 and later removed), one ``vllm.SamplingParams`` per prompt: ``n``,
``temperature``, ``top_p``, ``top_k`` (0 -> -1, "disabled" in every version), ``max_tokens``,
``stop_token_ids``, ``ignore_eos=True`` (only ``stop_token_ids`` end a completion, as in the
other engines), ``logprobs=0`` (the sampled token's log-prob only), ``detokenize=False`` and a
per-prompt ``seed`` (``seed + i * n`` for prompt ``i``; V1 gives child ``k`` of a request
``seed + k``, so every row has its own seed). Greedy requests ask for one completion and repeat
it ``n`` times (old vLLM refuses ``n > 1`` with temperature 0). The tokenizer is never loaded
(``skip_tokenizer_init=True``).

Log-probs: the protocol wants ``log_softmax(logits / T)`` of the sampled token, untruncated.
vLLM reports:

- vLLM >= 0.10.2 (V1): the engine passes ``logprobs_mode="processed_logprobs"``, so values are
  taken after temperature *and* top-k / top-p (renormalised over the kept tokens). Exact when
  ``top_p == 1`` and ``top_k == 0`` (the presets' settings); with truncation each value is
  higher by ``-log(kept mass)``.
- vLLM 0.8 - 0.10.1 with the V1 engine: raw ``log_softmax(logits)`` (T = 1, vLLM's default then,
  no way to change it); exact only at temperature 1 or greedy. A warning says so once.
- vLLM < 0.8, or the V0 engine (``VLLM_USE_V1=0``): after temperature and top-k / top-p, as in
  the first case.

The trainer uses these values for the ``rollout_logprob_gap`` metric and the KL-in-reward
option; with ``grpo.mu == 1`` the policy ratio uses the trainer's own recomputed log-probs.

Weights (``update_weights``): the policy's ``state_dict`` is pushed into the running vLLM model
in place, without reloading the engine, by the model's own ``load_weights(iterable of (name,
tensor))`` (which maps Hugging Face names onto vLLM's fused layers and copies across device and
dtype), then the prefix cache is reset (cached prompt keys/values were computed with the old
weights). The model is reached by the first of:

1. ``llm.llm_engine.model_executor.driver_worker.model_runner.model``: the V0 engine (vLLM
   0.6 - 0.10) and the in-process V1 engine (``llm_engine.model_executor`` is V1's alias for its
   executor when multiprocessing is off; TRL 1.16 syncs its colocated vLLM 0.22 - 0.31 this way).
2. ``llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner``:
   in-process V1 without that alias.
3. ``llm.collective_rpc(fn, args=(weights,))`` with a callable run on each worker
   (``LLM.collective_rpc`` since vLLM 0.7.x): the multiprocess V1 engine. Callables and the
   tensors are pickled to the engine process, which vLLM >= 0.9 only allows with
   ``VLLM_ALLOW_INSECURE_SERIALIZATION=1`` (set by this engine when ``in_process=False``).

By default the engine sets ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` before building the ``LLM``
(``in_process=True``) so that path 1 or 2 applies and the tensors are not serialised.

Sleep mode (``enable_sleep_mode=True``, vLLM >= 0.7.3): after each ``generate`` the engine calls
``llm.sleep(level=sleep_level)`` (level 1 offloads the weights to CPU memory and frees the KV
cache; level 2 discards the weights, which are then pushed again from the live model before the
next generation), and wakes vLLM before the next weight push or generation, so a trainer on the
same GPU gets the memory back between rollouts.
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from rlvr.rollout.engine import (
    check_prompts,
    default_pad_token_id,
    load_weights_into,
    params_version,
    register_engine,
)
from rlvr.rollout.types import RolloutOutput, RolloutTiming, SamplingParams
from rlvr.rollout.vllm_convert import (
    build_sampling_params,
    first_token_seconds,
    request_outputs_to_rollout,
)
from rlvr.rollout.vllm_weights import (
    find_inprocess_model,
    load_weights_on_worker,
    state_dict_weights,
)

INSTALL_HINT = "pip install 'rlvr[vllm]'"
LOGPROBS_MODE_SINCE = (0, 10, 2)  # first vLLM with the `logprobs_mode` engine argument
V1_DEFAULT_SINCE = (0, 8, 0)  # first vLLM whose default engine is V1 (raw log-probs)


def import_vllm():
    """Import and return the ``vllm`` module.

    Raises:
        ImportError: vLLM is not installed; the message says how to install it and that it
            needs a CUDA GPU.
    """
    try:
        import vllm  # optional dependency: vllm (extra `vllm`)
    except ImportError as exc:
        raise ImportError(
            f"the 'vllm' rollout engine needs vLLM, which needs a CUDA GPU: {INSTALL_HINT} "
            f"on a machine with an NVIDIA GPU ({exc}); on CPU use the 'torch' engine"
        ) from exc
    return vllm


def require_cuda() -> None:
    """Raise unless torch sees a CUDA GPU.

    Raises:
        RuntimeError: no CUDA device; the message names the install command and the CPU engine.
    """
    if not torch.cuda.is_available():
        raise RuntimeError(
            "the 'vllm' rollout engine needs a CUDA GPU and torch does not see one "
            f"(torch {torch.__version__}); install with {INSTALL_HINT} on a GPU machine, "
            "or use the 'torch' engine on CPU"
        )


def parse_version(text: str) -> tuple[int, int, int]:
    """``"0.10.2rc1.dev3"`` -> ``(0, 10, 2)``; missing parts are 0."""
    numbers = [int(x) for x in re.findall(r"\d+", text.split("+")[0])[:3]]
    return tuple(numbers + [0] * (3 - len(numbers)))  # type: ignore[return-value]


@register_engine("vllm", device="cuda")
class VLLMEngine:
    """Rollouts through vLLM on a CUDA GPU (see the module doc for the API paths used).

    Args:
        model: the policy, a transformers causal LM (saved once to a temporary folder for vLLM
            to load, and kept by reference: ``update_weights()`` and ``generate`` re-push it when
            its parameters changed in place), or a model folder / hub id (no live model then).
        pad_token_id: completion padding id (default from the model config, else 0).
        gpu_memory_utilization: share of the GPU's memory vLLM may take for weights, activations
            and KV cache (default 0.3, TRL's colocate default: leaves room for a trainer on the
            same GPU; raise it for a rollout-only GPU).
        enable_sleep_mode: free vLLM's GPU memory between generations (default False; vLLM
            >= 0.7.3). ``sleep_level``: 1 (default) offloads the weights to CPU, 2 drops them.
        dtype: vLLM's weight / compute dtype (default ``"bfloat16"``; ``"float32"`` to match
            the fp32 policy exactly, ``"auto"`` for the saved config's), or a ``torch.dtype``
            (what :func:`~rlvr.rollout.engine.create_engine` passes for a run's precision,
            resolved against the GPU).
        max_model_len: longest prompt + completion (default: the model config's).
        enforce_eager: no CUDA graphs (faster start, slower decode; default False).
        seed: vLLM's global seed (default 0).
        per_request_seed: seed each prompt from ``SamplingParams.seed`` (default True,
            reproducible); False lets vLLM sample without per-request generators (faster).
        in_process: run vLLM's engine in this process (default True; sets
            ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` unless already set) so weights are loaded
            directly; False keeps vLLM's engine process and syncs through ``collective_rpc``.
        llm: an already-built ``vllm.LLM`` (or a stand-in) to wrap instead of building one.
        sampling_params_cls: the ``SamplingParams`` factory (default ``vllm.SamplingParams``).
        llm_kwargs: more keyword arguments for ``vllm.LLM``.

    Raises:
        ImportError: vLLM is not installed (``pip install 'rlvr[vllm]'``).
        RuntimeError: torch sees no CUDA GPU.
    """

    name = "vllm"
    device = "cuda"  # as registered: the run's precision resolves against the GPU

    def __init__(self, model, *, pad_token_id: int | None = None,
                 gpu_memory_utilization: float = 0.3, enable_sleep_mode: bool = False,
                 sleep_level: int = 1, dtype: str | torch.dtype = "bfloat16",
                 max_model_len: int | None = None,
                 enforce_eager: bool = False, seed: int = 0, per_request_seed: bool = True,
                 in_process: bool = True, llm: Any = None,
                 sampling_params_cls: Callable[..., Any] | None = None,
                 llm_kwargs: Mapping[str, Any] | None = None):
        if sleep_level not in (1, 2):
            raise ValueError(f"sleep_level must be 1 or 2, got {sleep_level}")
        if isinstance(dtype, torch.dtype):
            dtype = str(dtype).removeprefix("torch.")
        self.model = model if isinstance(model, torch.nn.Module) else None
        self.pad_token_id = (default_pad_token_id(self.model, pad_token_id)
                             if self.model is not None else int(pad_token_id or 0))
        self.enable_sleep_mode = enable_sleep_mode
        self.sleep_level = sleep_level
        self.per_request_seed = per_request_seed
        self.vocab_size = self._vocab_size(model)
        self._export_dir: str | None = None
        self._asleep = False
        self._weights_lost = False
        self._warned_raw = False
        self.logprobs_mode = "processed_logprobs"
        if llm is None:
            vllm = import_vllm()
            require_cuda()
            version = parse_version(getattr(vllm, "__version__", "0"))
            self.vllm_version = version
            llm = self._build_llm(vllm, model, version,
                                  gpu_memory_utilization=gpu_memory_utilization, dtype=dtype,
                                  max_model_len=max_model_len, enforce_eager=enforce_eager,
                                  seed=seed, in_process=in_process,
                                  llm_kwargs=dict(llm_kwargs or {}))
            if sampling_params_cls is None:
                sampling_params_cls = vllm.SamplingParams
        else:
            self.vllm_version = None
        if sampling_params_cls is None:
            sampling_params_cls = import_vllm().SamplingParams
        self.llm = llm
        self.sampling_params_cls = sampling_params_cls
        self._pushed_version = params_version(self.model) if self.model is not None else None

    # -- construction -----------------------------------------------------------------------
    @staticmethod
    def _vocab_size(model) -> int | None:
        config = getattr(model, "config", None)
        if config is None and isinstance(model, str):
            try:
                # optional dependency: transformers (extra `train`); only for a model given
                # by path, and importing rlvr.rollout stays free of it.
                from transformers import AutoConfig

                config = AutoConfig.from_pretrained(model)
            except Exception:
                return None
        size = getattr(config, "vocab_size", None)
        return int(size) if size else None

    def _build_llm(self, vllm, model, version, *, gpu_memory_utilization, dtype, max_model_len,
                   enforce_eager, seed, in_process, llm_kwargs):
        if in_process:
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        else:
            os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
        if isinstance(model, torch.nn.Module):
            self._export_dir = tempfile.mkdtemp(prefix="rlvr-vllm-")
            model.save_pretrained(self._export_dir)
            path = self._export_dir
        else:
            path = str(model)
        kwargs: dict[str, Any] = dict(model=path, skip_tokenizer_init=True, dtype=dtype,
                                      gpu_memory_utilization=gpu_memory_utilization,
                                      enforce_eager=enforce_eager, seed=seed)
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if self.enable_sleep_mode:
            kwargs["enable_sleep_mode"] = True
        if version >= LOGPROBS_MODE_SINCE:
            kwargs["logprobs_mode"] = "processed_logprobs"
        elif version >= V1_DEFAULT_SINCE and os.environ.get("VLLM_USE_V1", "1") != "0":
            self.logprobs_mode = "raw_logprobs"
        kwargs.update(llm_kwargs)
        try:
            return vllm.LLM(**kwargs)
        except BaseException:
            self._remove_export()
            raise

    # -- weights ----------------------------------------------------------------------------
    def update_weights(self, source: Any = None) -> None:
        """Push policy weights into the running vLLM model (no engine reload).

        ``None``: push the live model now. An ``nn.Module`` that is the live model: push if
        its parameters changed since the last push. Another module or a ``state_dict``: load
        it into the live model (when there is one, so later automatic refreshes agree), then
        push it.

        Raises:
            TypeError: ``source`` is not None, a mapping or a module.
            RuntimeError: ``None`` given but the engine was built from a path (no live model).
        """
        if source is None:
            if self.model is None:
                raise RuntimeError("update_weights(None) needs a live model; this engine was "
                                   "built from a path: pass a state_dict or a module")
            self._push(self.model)
            return
        if source is self.model:
            if self._weights_lost or params_version(self.model) != self._pushed_version:
                self._push(self.model)
            return
        if not isinstance(source, (torch.nn.Module, Mapping)):
            raise TypeError(f"update_weights takes None, a state_dict or an nn.Module, "
                            f"not {type(source).__name__}")
        if self.model is not None:
            load_weights_into(self.model, source)
            self._push(self.model)
        else:
            self._push(source)

    def _push(self, source: Any) -> None:
        weights = state_dict_weights(source)
        self._wake()
        model = find_inprocess_model(self.llm)
        with torch.no_grad():
            if model is not None:
                model.load_weights(weights)
            elif callable(getattr(self.llm, "collective_rpc", None)):
                self.llm.collective_rpc(load_weights_on_worker, args=(weights,))
            else:
                raise RuntimeError(
                    "cannot reach vLLM's model to load weights: no in-process model runner and "
                    "no LLM.collective_rpc (vLLM >= 0.7); build the engine with in_process=True")
        reset = getattr(self.llm, "reset_prefix_cache", None)
        if callable(reset):
            reset()
        self._weights_lost = False
        if self.model is not None and source is self.model:
            self._pushed_version = params_version(self.model)

    # -- sleep mode ---------------------------------------------------------------------------
    def _wake(self) -> None:
        if not self._asleep:
            return
        self.llm.wake_up()
        self._asleep = False

    def _sleep(self) -> None:
        if not self.enable_sleep_mode or self._asleep:
            return
        self.llm.sleep(level=self.sleep_level)
        self._asleep = True
        if self.sleep_level == 2:
            self._weights_lost = True

    # -- generation -------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompt_ids: Sequence[Sequence[int]],
                 params: SamplingParams) -> RolloutOutput:
        """Sample ``params.n`` completions per prompt; see :class:`RolloutEngine`.

        Pushes the live model first when its parameters changed since the last push.

        Raises:
            ValueError: empty prompts or token ids outside the vocabulary.
        """
        prompts = check_prompts(prompt_ids, self.vocab_size or 2**62)
        if self.model is not None:
            self.update_weights(self.model)
        elif self._weights_lost:
            raise RuntimeError("vLLM dropped its weights (sleep level 2) and there is no live "
                               "model to push: call update_weights(state_dict) first")
        self._wake()
        self._warn_raw_logprobs(params)
        sampling = build_sampling_params(self.sampling_params_cls, params, len(prompts),
                                         self.per_request_seed)
        start = time.perf_counter()
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts],
                                    sampling_params=sampling, use_tqdm=False)
        total = time.perf_counter() - start
        self._sleep()
        first = first_token_seconds(outputs, total)
        timing = (RolloutTiming(prefill_seconds=first, decode_seconds=total - first)
                  if first is not None else RolloutTiming(decode_seconds=total))
        return request_outputs_to_rollout(outputs, params, self.pad_token_id, timing)

    def _warn_raw_logprobs(self, params: SamplingParams) -> None:
        if (self.logprobs_mode == "raw_logprobs" and not self._warned_raw and not params.greedy
                and params.temperature != 1.0):
            self._warned_raw = True
            warnings.warn(
                f"vLLM {'.'.join(map(str, self.vllm_version or ()))} (V1 engine, < 0.10.2) "
                "reports log-probs at temperature 1; RolloutOutput.logprobs are not the "
                f"tempered values at T={params.temperature} (upgrade to vLLM >= 0.10.2)",
                stacklevel=3)

    # -- teardown -----------------------------------------------------------------------------
    def close(self) -> None:
        """Drop the ``LLM`` (frees GPU memory once nothing else holds it) and the exported
        model folder. The engine is unusable afterwards."""
        self.llm = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        self._remove_export()

    def _remove_export(self) -> None:
        if self._export_dir is not None:
            shutil.rmtree(self._export_dir, ignore_errors=True)
            self._export_dir = None

    def __del__(self):  # best effort: the exported copy can be hundreds of MB
        try:
            self._remove_export()
        except Exception:
            pass

