"""The model behind ``rlvr serve``: :class:`ModelServer` turns validated requests into token
ids, sampling parameters and decoded choices.

Generation runs through :func:`rlvr.rollout.create_auto_engine` (``torch`` engine, ``hf`` for
architectures it refuses), one request at a time: CPU decoding gains nothing from running two
batches side by side, so admitted requests wait their turn.

Log-probs come from the engine (:mod:`rlvr.rollout.reported_logprobs`), in one of
:data:`LOGPROBS_MODES`: ``raw`` (default, what vLLM reports by default: ``log_softmax(logits)``,
temperature 1, no top-p / top-k truncation) or ``tempered`` (``log_softmax(logits / T)``, the
log-probs the trainer's GRPO ratio uses, :attr:`rlvr.rollout.RolloutOutput.logprobs`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Sequence

from rlvr.rollout import SamplingParams, create_auto_engine
from rlvr.serve.admission import Admission
from rlvr.serve.errors import APIError, bad_field
from rlvr.serve.schemas import (BaseRequest, ChatMessage, Choice, refuse_unsupported,
                                stop_strings)
from rlvr.serve.stream import token_pieces
from rlvr.tasks.prompting import stop_token_ids

log = logging.getLogger("rlvr.serve")

DEFAULT_MAX_TOKENS = 256
ENGINES = ("auto", "torch", "hf")
LOGPROBS_MODES = ("raw", "tempered")


class ModelServer:
    """A model, its tokenizer and a rollout engine, answering completion requests.

    Args:
        model: a transformers causal LM (plain, no adapters).
        tokenizer: its tokenizer (the chat template comes from here).
        model_id: the id reported by ``/v1/models`` and in responses.
        engine: ``auto`` (``torch``, or ``hf`` when the torch engine refuses the architecture),
            ``torch`` or ``hf``.
        max_concurrency: requests in flight at most (more get 429).
        default_max_tokens: ``max_tokens`` when a request gives none.
        precision: the engine's compute precision, ``auto`` / ``bf16`` / ``fp32``
            (:mod:`rlvr.models.precision`).
        logprobs_mode: the distribution reported log-probs are taken under, ``raw`` or
            ``tempered`` (see the module docstring).

    Raises:
        ValueError: unknown ``engine``, ``precision`` or ``logprobs_mode``, or
            ``max_concurrency`` < 1.
        rlvr.rollout.UnsupportedModelError: ``engine="torch"`` on an architecture it refuses.
    """

    def __init__(self, model, tokenizer, model_id: str, *, engine: str = "auto",
                 max_concurrency: int = 4, default_max_tokens: int = DEFAULT_MAX_TOKENS,
                 precision: str = "auto", logprobs_mode: str = "raw"):
        if engine not in ENGINES:
            raise ValueError(f"engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode: expected one of {', '.join(LOGPROBS_MODES)}, "
                             f"got {logprobs_mode!r}")
        self.logprobs_mode = logprobs_mode
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.created = int(time.time())
        self.admission = Admission(max_concurrency)
        self.default_max_tokens = default_max_tokens
        self.eos_ids = stop_token_ids(tokenizer)
        self.context_length = _context_length(model)
        self.engine = _make_engine(engine, model, tokenizer.pad_token_id, precision)
        self._generate_lock = threading.Lock()
        # A fast tokenizer resets its truncation / padding state on every call, which fails
        # ("Already borrowed") when two request threads use it at once.
        self._tokenizer_lock = threading.Lock()

    def warm_up(self) -> float:
        """Generate one token once, so the engine's one-off setup (weight snapshot, kernel
        packing: seconds on the default model) is not paid by the first request. Returns
        the seconds it took."""
        start = time.perf_counter()
        prompt = self._encode("Hi", special=False) or [0]
        with self._generate_lock:
            self.engine.generate([prompt], SamplingParams(temperature=0, max_new_tokens=1))
        return time.perf_counter() - start

    # -- request handling ---------------------------------------------------------------------

    def check_model(self, requested: str | None) -> None:
        """Raise a 404 :class:`APIError` unless ``requested`` is None or the served id."""
        if requested is not None and requested != self.model_id:
            raise APIError(404, f"model: {requested!r} is not served here; this server "
                                f"serves {self.model_id!r}", param="model",
                           code="model_not_found")

    def completion_prompts(self, prompt: str | list[str]) -> list[list[int]]:
        """Token ids of each prompt string (the tokenizer's own special tokens added).

        Raises:
            APIError: 400 naming ``prompt`` when it is an empty list or a prompt has no tokens.
        """
        texts = [prompt] if isinstance(prompt, str) else prompt
        if not texts:
            raise bad_field("prompt", "expected a string or a non-empty list of strings")
        ids = [self._encode(text, special=True) for text in texts]
        for i, row in enumerate(ids):
            if not row:
                where = "prompt" if isinstance(prompt, str) else f"prompt.{i}"
                raise bad_field(where, "the prompt is empty (0 tokens)")
        return ids

    def chat_prompt(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` under the chat template, ending with the assistant header.

        Raises:
            APIError: 400 naming ``messages`` when the tokenizer has no chat template or the
                template rejects the conversation.
        """
        if not getattr(self.tokenizer, "chat_template", None):
            raise bad_field("messages", f"model {self.model_id!r} has no chat template; use "
                                        f"/v1/completions")
        plain = [{"role": m.role, "content": m.text()} for m in messages]
        try:
            with self._tokenizer_lock:
                text = self.tokenizer.apply_chat_template(plain, add_generation_prompt=True,
                                                          tokenize=False)
        except Exception as exc:  # jinja raises its own TemplateError subclasses
            raise bad_field("messages", f"the chat template rejects them: {exc}") from exc
        return self._encode(text, special=False)

    def sampling(self, request: BaseRequest, prompts: list[list[int]], max_tokens: int | None):
        """:class:`rlvr.rollout.SamplingParams` for ``request`` (stop strings that are one
        token also stop decoding early; reported log-probs when the request asks for them).

        Raises:
            APIError: 400 naming a refused field (:data:`rlvr.serve.schemas.REFUSED_FIELDS`),
                ``top_logprobs`` without ``logprobs``, or ``max_tokens`` (prompt + max_tokens
                exceed the model's context).
        """
        refuse_unsupported(request)
        top = request.top_logprobs_asked()
        max_new = max_tokens or self._default_max_tokens(prompts)
        longest = max(len(p) for p in prompts)
        if self.context_length and longest + max_new > self.context_length:
            raise bad_field("max_tokens", f"prompt ({longest} tokens) + max_tokens ({max_new}) "
                                          f"exceeds the model's context of "
                                          f"{self.context_length} tokens")
        single = [self._single_token(s) for s in stop_strings(request.stop)]
        return SamplingParams(temperature=request.temperature, top_p=request.top_p,
                              top_k=max(request.top_k, 0), max_new_tokens=max_new,
                              n=request.n, seed=request.seed,
                              stop_token_ids=tuple(self.eos_ids) + tuple(
                                  t for t in single if t is not None),
                              top_logprobs=top or 0,
                              raw_logprobs=top is not None and self.logprobs_mode == "raw")

    def generate(self, prompts: list[list[int]], params: SamplingParams, stops: list[str], *,
                 logprobs: bool = False, pieces: bool = False) -> list[Choice]:
        """Sample ``params.n`` choices per prompt (prompt-major order), one call at a time.

        Args:
            prompts: token ids of each prompt.
            params: from :meth:`sampling`.
            stops: stop strings (the text is cut before the first one).
            logprobs: fill each choice's ``logprobs`` (and ``top_logprobs`` when
                ``params.top_logprobs`` > 0) from the engine's reported log-probs.
            pieces: fill each choice's ``pieces`` (the text each token adds; streaming and
                completions ``text_offset`` need them).
        """
        with self._generate_lock:
            out = self.engine.generate(prompts, params)
        choices = []
        for row in range(out.num_rows):
            choice = self._choice(out.completion(row), out.finish_reason[row], stops)
            choice.prompt_index = int(out.prompt_index[row])
            if logprobs:
                count = choice.tokens
                values = out.raw_logprobs if params.raw_logprobs else out.logprobs
                choice.logprobs = values[row, :count].tolist()
                if out.top_token_ids is not None:
                    choice.top_logprobs = [list(zip(ids, vals)) for ids, vals in zip(
                        out.top_token_ids[row, :count].tolist(),
                        out.top_logprobs[row, :count].tolist())]
            if pieces:
                choice.pieces = token_pieces(choice.token_ids, choice.text, self._decode)
            choices.append(choice)
        return choices

    def token_text(self, token_id: int) -> str:
        """One token's text (special tokens kept), as log-prob entries show it."""
        with self._tokenizer_lock:
            return self.tokenizer.decode([token_id], skip_special_tokens=False)

    # -- helpers ------------------------------------------------------------------------------

    def _default_max_tokens(self, prompts: list[list[int]]) -> int:
        """``default_max_tokens``, shortened to what the context leaves after the longest
        prompt (at least 1, so a prompt filling the context still gets the 400 above)."""
        if not self.context_length:
            return self.default_max_tokens
        room = self.context_length - max(len(p) for p in prompts)
        return max(1, min(self.default_max_tokens, room))

    def _encode(self, text: str, *, special: bool) -> list[int]:
        with self._tokenizer_lock:
            return list(self.tokenizer(text, add_special_tokens=special).input_ids)

    def _single_token(self, text: str) -> int | None:
        ids = self._encode(text, special=False)
        return ids[0] if len(ids) == 1 else None

    def _decode(self, ids: Sequence[int]) -> str:
        with self._tokenizer_lock:
            return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def _choice(self, ids: list[int], finish: str, stops: list[str]) -> Choice:
        """Decode one completion, cutting it before the first stop string. Its tokens then
        run up to the one that completed the stop string."""
        text = self._decode(ids)
        cut = _first_stop(text, stops)
        if cut is None:
            return Choice(text, finish, list(ids))
        lo, hi = 1, len(ids)  # smallest token prefix whose text already contains a stop
        while lo < hi:
            mid = (lo + hi) // 2
            if _first_stop(self._decode(ids[:mid]), stops) is None:
                lo = mid + 1
            else:
                hi = mid
        return Choice(text[:cut], "stop", list(ids[:lo]))


def _first_stop(text: str, stops: list[str]) -> int | None:
    """Index of the earliest occurrence of any stop string in ``text``, or None."""
    found = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(found) if found else None


def _context_length(model) -> int | None:
    config = getattr(model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def _make_engine(name: str, model, pad_token_id: int | None, precision: str = "auto"):
    return create_auto_engine(name, model, pad_token_id=pad_token_id, precision=precision,
                              log=log.info)
