"""The model behind ``rlvr serve``: :class:`ModelServer` turns validated requests into a
:class:`Job` (token ids, sampling parameters, the request's :class:`RequestRun`) and runs it.

Generation runs through :func:`rlvr.rollout.create_auto_engine` (``torch`` engine, ``hf`` for
architectures it refuses), one request at a time (CPU decoding gains nothing from running two
batches side by side); admitted requests wait their turn, the rest wait in the admission
queue (:mod:`rlvr.serve.admission`). The engine calls the request's :class:`RequestRun` at
every step (:mod:`rlvr.rollout.hooks`), which streams the tokens, applies the logits rules and
ends rows (stop strings, a client gone).

Log-probs are taken from the step's logits, in one of :data:`LOGPROBS_MODES`: ``raw``
(default, what vLLM reports by default: ``log_softmax(logits)``, temperature 1, no top-p /
top-k truncation, before penalties and other logits rules) or ``tempered``
(``log_softmax(logits / T)``, the log-probs the trainer's GRPO ratio uses,
:attr:`rlvr.rollout.RolloutOutput.logprobs`).

Tokenizing: a text prompt longer than ``context * L`` characters (L: the longest token's
length in characters) cannot fit the context and is refused before it is tokenized; fast
tokenizers encode without the tokenizer lock (only slow ones take it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rlvr.rollout import SamplingParams, create_auto_engine
from rlvr.serve.admission import Admission
from rlvr.serve.decoding import RequestRun
from rlvr.serve.errors import APIError, bad_field
from rlvr.serve.logits_rules import LogitsRules
from rlvr.serve.metrics import Metrics
from rlvr.serve.prompt_scores import PromptScores, score_prompt
from rlvr.serve.schemas import (
    BaseRequest,
    ChatRequest,
    CompletionRequest,
    refuse_unsupported,
    stop_strings,
    unknown_fields,
)
from rlvr.tasks.prompting import stop_token_ids

log = logging.getLogger("rlvr.serve")

DEFAULT_MAX_TOKENS = 256
DEFAULT_MAX_QUEUE = 1024
ENGINES = ("auto", "torch", "hf")
LOGPROBS_MODES = ("raw", "tempered")


@dataclass
class Job:
    """One request, ready to run.

    Attributes:
        prompts: token ids of each prompt.
        prompt_texts: each prompt's text (``echo``).
        params: the engine's sampling parameters, or None when nothing is generated
            (``max_tokens: 0`` with ``echo``).
        run: the decoding hooks and per-row state.
        score_k: top log-probs per prompt position to compute (``prompt_logprobs`` /
            ``echo`` with ``logprobs``), or None: the prompt is not scored.
        scores: the prompts' :class:`PromptScores` once run.
        admitted_at: when it was admitted (``time.perf_counter``).
    """

    prompts: list[list[int]]
    prompt_texts: list[str]
    params: SamplingParams | None
    run: RequestRun
    score_k: int | None = None
    scores: list[PromptScores] | None = None
    admitted_at: float = 0.0


class ModelServer:
    """A model, its tokenizer and a rollout engine, answering completion requests.

    Args:
        model: a transformers causal LM (plain, no adapters).
        tokenizer: its tokenizer (the chat template comes from here).
        model_id: the id reported by ``/v1/models`` and in responses.
        engine: ``auto`` (``torch``, or ``hf`` when the torch engine refuses the architecture),
            ``torch`` or ``hf``.
        max_concurrency: requests admitted at once (they generate one after another).
        max_queue: requests waiting for admission at most (more get 429).
        default_max_tokens: ``max_tokens`` when a request gives none.
        precision: the engine's compute precision, ``auto`` / ``bf16`` / ``fp32``
            (:mod:`rlvr.models.precision`).
        logprobs_mode: the distribution reported log-probs are taken under, ``raw`` or
            ``tempered`` (see the module docstring).
        ignore_unknown_fields: accept requests with fields no endpoint declares, logging a
            warning naming them (what vLLM does), instead of refusing them with a 400
            (default).

    Raises:
        ValueError: unknown ``engine``, ``precision`` or ``logprobs_mode``,
            ``max_concurrency`` < 1 or ``max_queue`` < 0.
        rlvr.rollout.UnsupportedModelError: ``engine="torch"`` on an architecture it refuses.
    """

    def __init__(self, model, tokenizer, model_id: str, *, engine: str = "auto",
                 max_concurrency: int = 4, max_queue: int = DEFAULT_MAX_QUEUE,
                 default_max_tokens: int = DEFAULT_MAX_TOKENS, precision: str = "auto",
                 logprobs_mode: str = "raw", ignore_unknown_fields: bool = False):
        if engine not in ENGINES:
            raise ValueError(f"engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode: expected one of {', '.join(LOGPROBS_MODES)}, "
                             f"got {logprobs_mode!r}")
        self.logprobs_mode = logprobs_mode
        self.ignore_unknown_fields = ignore_unknown_fields
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.created = int(time.time())
        self.admission = Admission(max_concurrency, max_queue)
        self.executor = ThreadPoolExecutor(max_workers=max_concurrency,
                                           thread_name_prefix="rlvr-serve")
        self.metrics = Metrics(lambda: self.admission.in_flight, lambda: self.admission.waiting)
        self.default_max_tokens = default_max_tokens
        self.eos_ids = stop_token_ids(tokenizer)
        self.context_length = _context_length(model)
        self.vocab_size = int(getattr(model.config, "vocab_size", 0) or len(tokenizer))
        self.max_token_chars = max((len(t) for t in tokenizer.get_vocab()), default=1) or 1
        self.engine = _make_engine(engine, model, tokenizer.pad_token_id, precision)
        self._generate_lock = threading.Lock()
        # A slow tokenizer is not thread-safe; a fast one encodes through its Rust backend
        # (the Python wrapper resets truncation / padding on every call, which fails with
        # "Already borrowed" when two threads call it at once).
        self._backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(
            tokenizer, "is_fast", False) else None
        self._tokenizer_lock = threading.Lock() if self._backend is None else \
            contextlib.nullcontext()

    def warm_up(self) -> float:
        """Sample two tokens once (a prefill and a decode step), so the engine's one-off
        setup (weight snapshot, kernel packing and compiling: seconds on the default model)
        is not paid by the first request. Returns the seconds it took."""
        start = time.perf_counter()
        prompt = self.encode("Hi", special=False) or [0]
        with self._generate_lock:
            self.engine.generate([prompt], SamplingParams(temperature=1.0, max_new_tokens=2,
                                                          seed=0))
        return time.perf_counter() - start

    # -- request handling ---------------------------------------------------------------------

    def check_model(self, requested: str | None) -> None:
        """Raise a 404 :class:`APIError` unless ``requested`` is None or the served id."""
        if requested is not None and requested != self.model_id:
            raise APIError(404, f"model: {requested!r} is not served here; this server "
                                f"serves {self.model_id!r}", param="model",
                           code="model_not_found")

    def check_fields(self, request: BaseRequest) -> None:
        """Refuse fields that are not implemented (:func:`refuse_unsupported`) and, unless
        ``ignore_unknown_fields``, fields no endpoint declares (else log them).

        Raises:
            APIError: 400 naming the first such field.
        """
        refuse_unsupported(request)
        extra = unknown_fields(request)
        if not extra:
            return
        if not self.ignore_unknown_fields:
            raise bad_field(extra[0], f"unknown field{'s' if len(extra) > 1 else ''} "
                                      f"{', '.join(extra)}: not implemented by rlvr serve "
                                      f"(start it with --ignore-unknown-fields to ignore them)")
        log.warning("ignoring unknown request fields: %s", ", ".join(extra))

    def plan(self, request: BaseRequest) -> Job:
        """Check ``request`` and turn it into a :class:`Job` (tokenizing its prompts).

        Raises:
            APIError: 400 naming a bad or refused field (see :meth:`check_fields`), a
                prompt that does not fit the context, or bad token ids.
        """
        self.check_fields(request)
        if isinstance(request, ChatRequest):
            prompts = [self.chat_prompt(request)]
            texts = [""]
            max_tokens = (request.max_completion_tokens if request.max_completion_tokens
                          is not None else request.max_tokens)
            echo = False
        else:
            prompts, texts = self.completion_prompts(request)
            max_tokens, echo = request.max_tokens, bool(request.echo)
        if request.truncate_prompt_tokens is not None:
            prompts = [p[-request.truncate_prompt_tokens:] for p in prompts]
        if max_tokens == 0 and not echo:
            raise bad_field("max_tokens", "expected an int >= 1 (0 only with echo), got 0")
        max_new = self._default_max_tokens(prompts) if max_tokens is None else max_tokens
        self._check_context(prompts, max_new)
        top = request.top_logprobs_asked()
        params = self._sampling(request, prompts, max(max_new, 1))
        score_k = None
        if request.prompt_logprobs is not None or (echo and top is not None):
            score_k = max(request.prompt_logprobs or 0, top or 0 if echo else 0)
        report = None if top is None else dataclasses.replace(
            params, top_logprobs=top, raw_logprobs=self.logprobs_mode == "raw")
        skip = request.skip_special_tokens
        run = RequestRun(len(prompts) * params.n, n=params.n, max_new=max_new,
                         stop_ids=params.stop_token_ids,
                         eos_ids=() if request.ignore_eos else self.eos_ids,
                         stops=stop_strings(request.stop),
                         include_stop=request.include_stop_str_in_output,
                         min_tokens=request.min_tokens,
                         decode=lambda ids: self.decode(ids, skip_special=skip),
                         report=report, rules=self._rules(request, prompts, params))
        return Job(prompts, texts, params if max_new > 0 else None, run, score_k)

    def execute(self, job: Job) -> None:
        """Run ``job`` (in a worker thread): score its prompts when asked, generate (one
        request at a time), then end the rows left unfinished and emit their last pieces."""
        with self._generate_lock:
            job.admitted_at = job.admitted_at or time.perf_counter()
            if job.score_k is not None:
                job.scores = [score_prompt(self.model, p, job.score_k) for p in job.prompts]
            if job.params is not None and not job.run.cancelled:
                self.engine.generate(job.prompts, job.params, hooks=job.run)
        final = job.run.finalize()
        if final and job.run.emit is not None:
            job.run.emit(final)

    def completion_prompts(self, request: CompletionRequest
                           ) -> tuple[list[list[int]], list[str]]:
        """Token ids and text of each prompt: a string or list of strings (tokenized, the
        tokenizer's special tokens added unless ``add_special_tokens`` is false), a list of
        token ids or a list of such lists (decoded for ``echo``).

        Raises:
            APIError: 400 naming ``prompt`` (or ``prompt.i``) when it is an empty list, a
                prompt has no tokens, a token id is outside the vocabulary or a text is
                longer than the context can hold.
        """
        prompt = request.prompt
        special = request.add_special_tokens is not False
        if isinstance(prompt, str):
            items: list = [prompt]
        elif prompt and isinstance(prompt[0], int):
            items = [prompt]
        else:
            items = list(prompt)
        if not items:
            raise bad_field("prompt", "expected a string, a list of token ids or a non-empty "
                                      "list of them")
        single = isinstance(prompt, str) or isinstance(prompt[0], int)
        ids, texts = [], []
        for i, item in enumerate(items):
            where = "prompt" if single else f"prompt.{i}"
            if isinstance(item, str):
                row = self.encode(item, special=special, field=where)
                text = item
            else:
                bad = [t for t in item if not 0 <= t < self.vocab_size]
                if bad:
                    raise bad_field(where, f"token id {bad[0]} is outside the vocabulary "
                                           f"[0, {self.vocab_size})")
                row, text = list(item), self.decode(item, skip_special=False)
            if not row:
                raise bad_field(where, "the prompt is empty (0 tokens)")
            ids.append(row)
            texts.append(text)
        return ids, texts

    def chat_prompt(self, request: ChatRequest) -> list[int]:
        """Token ids of ``request.messages`` under the chat template (ending with the
        assistant header when ``add_generation_prompt``, or continuing the last assistant
        message with ``continue_final_message``; ``chat_template_kwargs`` passed on).

        Raises:
            APIError: 400 naming ``messages`` when the tokenizer has no chat template, the
                template rejects the conversation or it is longer than the context can hold;
                ``continue_final_message`` with ``add_generation_prompt`` or without a final
                assistant message; ``chat_template_kwargs.<key>`` for a reserved key.
        """
        if not getattr(self.tokenizer, "chat_template", None):
            raise bad_field("messages", f"model {self.model_id!r} has no chat template; use "
                                        f"/v1/completions")
        extra = dict(request.chat_template_kwargs or {})
        for key in ("conversation", "messages", "tokenize", "add_generation_prompt",
                    "continue_final_message", "chat_template", "tools", "documents"):
            if key in extra:
                raise bad_field(f"chat_template_kwargs.{key}", "reserved; set it as a "
                                                               "request field")
        if request.continue_final_message:
            if request.add_generation_prompt:
                raise bad_field("continue_final_message", "cannot be combined with "
                                                          "add_generation_prompt: true")
            if request.messages[-1].role != "assistant":
                raise bad_field("continue_final_message", "the last message must be the "
                                                          "assistant's")
        plain = [{"role": m.role, "content": m.text()} for m in request.messages]
        self._check_chars(sum(len(m["content"]) for m in plain), "messages")
        try:
            text = self.tokenizer.apply_chat_template(
                plain, add_generation_prompt=request.add_generation_prompt,
                continue_final_message=request.continue_final_message, tokenize=False,
                **extra)
        except Exception as exc:  # jinja raises its own TemplateError subclasses
            raise bad_field("messages", f"the chat template rejects them: {exc}") from exc
        return self.encode(text, special=bool(request.add_special_tokens), field="messages")

    def token_text(self, token_id: int) -> str:
        """One token's text (special tokens kept), as log-prob entries show it."""
        return self.decode([token_id], skip_special=False)

    def encode(self, text: str, *, special: bool, field: str = "prompt") -> list[int]:
        """Token ids of ``text`` (``special``: add the tokenizer's special tokens).

        Raises:
            APIError: 400 naming ``field`` when ``text`` cannot fit the context.
        """
        self._check_chars(len(text), field)
        if self._backend is not None:
            return list(self._backend.encode(text, add_special_tokens=special).ids)
        with self._tokenizer_lock:
            return list(self.tokenizer(text, add_special_tokens=special).input_ids)

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        """The text of ``ids`` (``skip_special``: special tokens dropped)."""
        with self._tokenizer_lock:
            return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special)

    # -- helpers ------------------------------------------------------------------------------

    def _sampling(self, request: BaseRequest, prompts: list[list[int]], max_new: int
                  ) -> SamplingParams:
        stops = self.check_token_ids(request.stop_token_ids, "stop_token_ids")
        eos = () if request.ignore_eos else self.eos_ids
        if request.min_tokens > max_new:
            raise bad_field("min_tokens", f"must not exceed max_tokens ({max_new}), got "
                                          f"{request.min_tokens}")
        return SamplingParams(temperature=request.temperature, top_p=request.top_p,
                              top_k=max(request.top_k, 0), max_new_tokens=max_new,
                              n=request.n, seed=request.seed,
                              stop_token_ids=tuple(set(eos) | set(stops)))

    def _rules(self, request: BaseRequest, prompts: list[list[int]], params: SamplingParams
               ) -> LogitsRules:
        allowed = request.allowed_token_ids
        if allowed is not None:
            if not allowed:
                raise bad_field("allowed_token_ids", "expected a non-empty list of token ids")
            self.check_token_ids(allowed, "allowed_token_ids")
        bias = {}
        for key, value in (request.logit_bias or {}).items():
            token = int(key) if key.strip().lstrip("-").isdigit() else -1
            if not 0 <= token < self.vocab_size:
                raise bad_field("logit_bias", f"keys are token ids in [0, {self.vocab_size}), "
                                              f"got {key!r}")
            if not -100 <= value <= 100:
                raise bad_field("logit_bias", f"biases are in [-100, 100], got {value!r}")
            bias[token] = float(value)
        words = []
        for word in request.bad_words or []:
            for text in (word.lstrip(), " " + word.lstrip()):
                ids = self.encode(text, special=False, field="bad_words")
                if ids and ids not in words:
                    words.append(ids)
        return LogitsRules(n=params.n, prompts=prompts, allowed=allowed,
                           stop_ids=params.stop_token_ids, min_tokens=request.min_tokens,
                           bias=bias, bad_words=words,
                           repetition_penalty=request.repetition_penalty,
                           frequency_penalty=request.frequency_penalty or 0.0,
                           presence_penalty=request.presence_penalty or 0.0,
                           min_p=request.min_p, temperature=request.temperature)

    def check_token_ids(self, ids: list[int] | None, field: str) -> list[int]:
        """``ids`` (None: []) as a list.

        Raises:
            APIError: 400 naming ``field`` for an id outside the vocabulary.
        """
        bad = [t for t in ids or [] if not 0 <= t < self.vocab_size]
        if bad:
            raise bad_field(field, f"token id {bad[0]} is outside the vocabulary "
                                   f"[0, {self.vocab_size})")
        return list(ids or [])

    def _check_chars(self, chars: int, field: str) -> None:
        """Refuse a text that cannot fit the context before tokenizing it: every token holds
        at most ``max_token_chars`` characters."""
        if self.context_length and chars > self.context_length * self.max_token_chars:
            raise bad_field(field, f"{chars} characters cannot fit the model's context of "
                                   f"{self.context_length} tokens (a token holds at most "
                                   f"{self.max_token_chars} characters)")

    def _check_context(self, prompts: list[list[int]], max_new: int) -> None:
        longest = max(len(p) for p in prompts)
        if self.context_length and longest + max_new > self.context_length:
            raise bad_field("max_tokens", f"prompt ({longest} tokens) + max_tokens ({max_new}) "
                                          f"exceeds the model's context of "
                                          f"{self.context_length} tokens")

    def _default_max_tokens(self, prompts: list[list[int]]) -> int:
        """``default_max_tokens``, shortened to what the context leaves after the longest
        prompt (at least 1, so a prompt filling the context still gets the 400 above)."""
        if not self.context_length:
            return self.default_max_tokens
        room = self.context_length - max(len(p) for p in prompts)
        return max(1, min(self.default_max_tokens, room))


def _context_length(model) -> int | None:
    config = getattr(model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def _make_engine(name: str, model, pad_token_id: int | None, precision: str = "auto"):
    return create_auto_engine(name, model, pad_token_id=pad_token_id, precision=precision,
                              log=log.info)
