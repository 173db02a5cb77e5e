"""``rlvr serve``: the OpenAI-compatible server (:mod:`rlvr.serve`) over a model or
checkpoint."""

from __future__ import annotations

import typer

from rlvr.cli.common import PRECISION_HELP, check_model_name, err, fail, precision_choice
from rlvr.limits import MAX_TOKENS, MAX_WORKERS
from rlvr.models.loader import ModelLoadError


def serve(
    model: str = typer.Option(..., "--model", "-m", help="tiny-random, smollm2-135m-instruct, "
                              "or a local HF directory (RUN/sft_model, "
                              "RUN/checkpoints/step-N, LoRA adapter checkpoints too)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="TCP port."),
    max_concurrency: int = typer.Option(4, "--max-concurrency", min=1, max=MAX_WORKERS,
                                        help="Requests admitted at once (they generate one "
                                        "after another); the next ones wait in the queue."),
    max_queue: int = typer.Option(1024, "--max-queue", min=0, help="Requests waiting for "
                                  "admission at most; one more gets HTTP 429."),
    ignore_unknown_fields: bool = typer.Option(False, "--ignore-unknown-fields", help="Accept "
                                               "request fields rlvr serve does not know, "
                                               "logging a warning (default: refuse them with "
                                               "HTTP 400 naming them)."),
    engine: str = typer.Option("auto", "--engine", help="Rollout engine: auto (torch, or hf "
                               "for architectures torch refuses), torch or hf."),
    max_tokens: int = typer.Option(256, "--default-max-tokens", min=1, max=MAX_TOKENS,
        help="max_tokens of requests that give none."),
    precision: str = typer.Option("auto", "--precision", help=PRECISION_HELP),
    served_model_name: str | None = typer.Option(None, "--served-model-name", help="The "
                                                    "model id /v1/models reports and a "
                                                    "request's `model` must name (default: "
                                                    "--model)."),
    logprobs_mode: str = typer.Option("raw", "--logprobs-mode", help="The distribution "
                                      "reported log-probs (logprobs / top_logprobs) are "
                                      "taken under: raw (log_softmax(logits), as vLLM "
                                      "reports by default) or tempered (at the request's "
                                      "temperature, as the trainer computes them)."),
) -> None:
    """Serve a model through the OpenAI-compatible API: /v1/completions,
    /v1/chat/completions, /v1/models, /health, /version, /metrics, /tokenize, /detokenize,
    /tokenizer_info (Ctrl-C stops). Logs one line per request (method, path, status,
    latency, tokens) on stderr."""
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.serve import ENGINES, LOGPROBS_MODES, bind_socket, missing_dependencies, serve_forever

    if engine not in ENGINES:
        raise fail(f"--engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
    if logprobs_mode not in LOGPROBS_MODES:
        raise fail(f"--logprobs-mode: expected one of {', '.join(LOGPROBS_MODES)}, got "
                   f"{logprobs_mode!r}")
    check_model_name(model, "--model")
    if served_model_name is not None and not served_model_name.strip():
        raise fail("--served-model-name: expected a non-empty name")
    choice = precision_choice(precision)
    if missing_dependencies():
        raise fail(f"rlvr serve needs {', '.join(missing_dependencies())}: "
                   f"pip install 'rlvr[serve]'", code=1)

    try:
        sock = bind_socket(host, port)
    except OSError as exc:
        raise fail(f"--host/--port: {exc.strerror or exc}") from None
    try:
        server = _model_server(model, engine, max_concurrency, max_tokens, choice.precision,
                               served_model_name, logprobs_mode, max_queue,
                               ignore_unknown_fields)
        server.warm_up()
    except BaseException:
        sock.close()
        raise
    named = f" as {served_model_name!r}" if served_model_name else ""
    err.print(f"[bold]rlvr serve[/] {model}{named} (engine {server.engine.name}) on "
              f"http://{host}:{port}/v1", highlight=False)
    serve_forever(server, sock)


def _model_server(name: str, engine: str, max_concurrency: int, max_tokens: int,
                  precision: str = "auto", served_name: str | None = None,
                  logprobs_mode: str = "raw", max_queue: int = 1024,
                  ignore_unknown_fields: bool = False):
    """Load ``name`` and wrap it in a ModelServer serving it as ``served_name`` (default:
    ``name``); bad input exits 2 naming the option."""
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.models.inference import load_for_inference
    from rlvr.rollout import UnsupportedModelError
    from rlvr.serve import ModelServer

    try:
        model, tokenizer = load_for_inference(name)
    except ModelLoadError as exc:
        raise fail(f"--model: {exc}") from None
    try:
        return ModelServer(model, tokenizer, served_name or name, engine=engine,
                           max_concurrency=max_concurrency, default_max_tokens=max_tokens,
                           precision=precision, logprobs_mode=logprobs_mode,
                           max_queue=max_queue, ignore_unknown_fields=ignore_unknown_fields)
    except UnsupportedModelError as exc:
        raise fail(f"--engine: {exc}") from None
