"""`rlvr report RUN_DIR`: the HTML run report.

Part 1 builds a synthetic run directory by hand and checks what the page says (plots decode,
alerts are listed and drawn, numbers are formatted, user text is escaped, missing inputs say
"not recorded"). Part 2 trains the smoke preset for real, writes its report and renders it in
headless Chromium (skipped when the `chromium` binary is absent).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.reports.plots import ACTION_COLOURS
from rlvr.reports.run_report import write_run_report

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
IMG = re.compile(r'<img alt="([^"]*)" src="data:image/png;base64,([^"]*)">')
CURVE_TITLES = [
    "Reward per step (mean over completions)", "Completion length and truncation",
    "KL divergence to the reference", "Clip fraction", "Zero-variance groups", "Degeneration",
    "Format and parsing errors", "Policy entropy", "Gradient norm", "Seconds per step"]
ALL_TITLES = CURVE_TITLES + ["Validation pass@1"]
XSS = "<script>alert('pwned')</script> & more"
ALERTS = [
    {"step": 4, "check": "kl_spike", "action": "warn", "message": "KL 0.31 above 0.20",
     "value": 0.31, "threshold": 0.2, "time": "2025-01-01T00:00:00Z"},
    {"step": 9, "check": "reward_hacking", "action": "stop",
     "message": "reward rose 0.4 while accuracy stayed flat <b>suspicious</b>",
     "value": 0.4, "threshold": 0.1, "examples": ["#### 42 #### 42 #### 42"],
     "time": "2025-01-01T00:05:00Z"},
]
BASELINE = {"label": "before_grpo", "step": 0, "pass_at_1": 0.475, "mean_reward": 0.31,
            "format_rate": 0.9, "truncation_rate": 0.05, "mean_length": 120.4, "n": 200,
            "seconds": 10.0}
TRAINED = {"label": "trained", "step": 12, "pass_at_1": 0.695, "mean_reward": 0.52,
           "format_rate": 0.985, "truncation_rate": 0.01, "mean_length": 98.2, "n": 200,
           "seconds": 9.0}
BASE = {**BASELINE, "label": "base", "pass_at_1": 0.2, "mean_reward": 0.1}
PASS_AT_K = {
    "baseline": {"pass@k": {"1": 0.45, "4": 0.7, "8": 0.8}, "maj@k": {"1": 0.45, "4": 0.55,
                 "8": 0.6}, "n": 8, "temperature": 0.7, "problems": 200},
    "trained": {"pass@k": {"1": 0.65, "4": 0.85, "8": 0.9}, "maj@k": {"1": 0.65, "4": 0.72,
                "8": 0.75}, "n": 8, "temperature": 0.7, "problems": 200},
}
CONFIG = """name: synthetic-run
seed: 7
model: {name: tiny-random}
data: {source: arithmetic}
grpo: {steps: 12, prompts_per_step: 8, group_size: 4, learning_rate: 1.0e-5}
algo: {kl_coef: 0.02}
"""


def _metrics_row(step: int) -> dict:
    row = {"step": step, "reward_mean": 0.2 + 0.03 * step, "reward_std": 0.1,
           "reward_mean/2d+2d": 0.3 + 0.02 * step, "reward_mean/1dop1d": 0.1 + 0.04 * step,
           "accuracy": 0.02 * step, "format_error_rate": 0.3 - 0.02 * step,
           "parse_failure_rate": 0.05, "multiple_answer_rate": 0.01,
           "zero_variance_fraction": 0.5 - 0.03 * step, "length_mean": 100 - step,
           "length_max": 160 - step, "truncation_rate": 0.1 - 0.005 * step,
           "kl": 0.01 * step, "clip_frac": 0.02 + 0.001 * step, "entropy": 1.2 - 0.05 * step,
           "grad_norm": 1.0 + 0.1 * (step % 3), "lr": 1e-5, "repetition_rate": 0.01 * step,
           "garbled_rate": 0.002 * step, "script_mix_rate": 0.001 * step,
           "seconds_rollout": 3.0, "seconds_reward": 0.5, "seconds_update": 2.0}
    if step == 3:
        del row["kl"]  # a key missing in some rows
    if step == 5:
        row["reward_mean"] = float("nan")
    if step == 6:
        row["entropy"] = None
    return row


def _jsonl(path: Path, rows: list[dict], tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)


def _samples() -> list[dict]:
    rows = []
    for step in range(1, 11):
        for i in range(6):
            rows.append({"step": step, "completion": f"step {step} sample {i}\n#### {i}",
                         "reward": 1.0 if i % 2 else 0.1,
                         "components": {"outcome": float(i % 2), "format": 1.0},
                         "status": "correct" if i % 2 else "wrong", "extracted": str(i),
                         **({"category": "2d+2d", "id": f"arith-{step}", "reference": "1"}
                            if i == 1 else {})})
    rows[0]["completion"] = XSS
    return rows


@pytest.fixture()
def run_dir(tmp_path) -> Path:
    """A complete synthetic run (12 steps, 2 alerts, results with sampled pass@k)."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "config.yaml").write_text(CONFIG)
    # the last line is half-written, as in a run that is still going
    _jsonl(d / "metrics.jsonl", [_metrics_row(s) for s in range(1, 13)], '{"step": 13, "rew')
    _jsonl(d / "validation.jsonl", [BASE, BASELINE, {**BASELINE, "label": "grpo", "step": 6,
                                                     "pass_at_1": 0.6}, TRAINED])
    _jsonl(d / "alerts.jsonl", ALERTS)
    _jsonl(d / "samples.jsonl", _samples())
    (d / "results.json").write_text(json.dumps({
        "baseline": BASELINE, "trained": TRAINED, "base_model": BASE, "pass_at_k": PASS_AT_K,
        "gain_pass_at_1": TRAINED["pass_at_1"] - BASELINE["pass_at_1"], "wall_seconds": 600.0}))
    return d


def _images(page: str) -> dict[str, Image.Image]:
    """alt text -> fully decoded image, for every embedded PNG."""
    out = {}
    for alt, payload in IMG.findall(page):
        image = Image.open(io.BytesIO(base64.b64decode(payload, validate=True)))
        image.load()
        out[html.unescape(alt)] = image
    return out


def _near(image: Image.Image, colour_hex: str, tolerance: int = 12) -> tuple[int, float]:
    """Pixels within ``tolerance`` (per channel) of the colour: how many, and the fraction of
    the image height they span (a vertical line spans most of it, a legend entry does not)."""
    target = np.array([int(colour_hex[i:i + 2], 16) for i in (1, 3, 5)])
    pixels = np.asarray(image.convert("RGB"), dtype=int)
    hits = (np.abs(pixels - target) <= tolerance).all(axis=2)
    rows = np.nonzero(hits.any(axis=1))[0]
    span = (rows.max() - rows.min()) / hits.shape[0] if rows.size else 0.0
    return int(hits.sum()), float(span)


# -- part 1: synthetic run ----------------------------------------------------------------------
def test_every_plot_is_a_real_png(run_dir):
    page = write_run_report(run_dir).read_text()
    assert (run_dir / "report.html").is_file()
    images = _images(page)
    assert sorted(images) == sorted(ALL_TITLES)
    assert len(IMG.findall(page)) == page.count("<img")
    for alt, image in images.items():
        assert image.format == "PNG" and image.width > 200 and image.height > 100, alt
        colours = image.convert("RGB").getcolors(1 << 24)
        assert len(colours) > 20, f"{alt}: nearly a single colour"
        assert image.mode == "RGBA" and image.getextrema()[3] == (255, 255), \
            f"{alt}: not opaque (the Chromium check relies on opaque PNGs)"


def test_alerts_are_tabled_and_drawn_on_the_timeline(run_dir):
    page = write_run_report(run_dir).read_text()
    alerts = page[page.index('id="alerts"'):page.index('id="samples"')]
    assert "1 stop, 1 warn" in alerts
    assert "<td>4</td><td>kl_spike</td>" in alerts and "KL 0.31 above 0.20" in alerts
    assert "<td>9</td><td>reward_hacking</td>" in alerts
    assert "stayed flat &lt;b&gt;suspicious&lt;/b&gt;" in alerts and "<b>suspicious" not in page
    assert "#### 42 #### 42" in alerts and "0.3100" in alerts and "0.2000" in alerts
    reward = _images(page)[CURVE_TITLES[0]]
    for action in ("warn", "stop"):
        count, span = _near(reward, ACTION_COLOURS[action])
        assert count > 20 and span > 0.6, (action, count, span)

    (run_dir / "alerts.jsonl").write_text("")
    quiet = write_run_report(run_dir).read_text()
    assert "No alerts were raised." in quiet
    reward = _images(quiet)[CURVE_TITLES[0]]
    assert _near(reward, ACTION_COLOURS["stop"])[0] == _near(reward, ACTION_COLOURS["warn"])[0] == 0


def test_baseline_vs_trained_numbers(run_dir):
    page = write_run_report(run_dir).read_text()
    assert "pass@1 (greedy): 47.5% &rarr; 69.5% (+22.0 points)" in page
    assert ("<tr><td>baseline (entered GRPO)</td><td>0</td><td>47.5%</td><td>0.310</td>"
            "<td>90.0%</td><td>5.0%</td><td>120.4</td><td>200</td></tr>") in page
    assert ("<tr><td>trained (GRPO)</td><td>12</td><td>69.5%</td><td>0.520</td>"
            "<td>98.5%</td><td>1.0%</td><td>98.2</td><td>200</td></tr>") in page
    assert "<td>base (no SFT)</td><td>0</td><td>20.0%</td>" in page
    assert ("<th>model</th><th>pass@1</th><th>pass@4</th><th>pass@8</th><th>maj@4</th>"
            "<th>maj@8</th>") in page
    assert ("<tr><td>trained (GRPO)</td><td>65.0%</td><td>85.0%</td><td>90.0%</td>"
            "<td>72.0%</td><td>75.0%</td></tr>") in page
    assert ("<tr><td>gain (points)</td><td>+20.0</td><td>+15.0</td><td>+10.0</td>"
            "<td>+17.0</td><td>+15.0</td></tr>") in page
    assert "n = 8 samples per problem, temperature 0.7, 200 problems" in page
    assert "wall time: 10.0 min" in page


def test_headline_carries_the_paired_interval(run_dir):
    """A run that recorded both rows' verdicts shows the gain's 95% interval and flips."""
    results = json.loads((run_dir / "results.json").read_text())
    # 200 problems: 50 fixed, 6 broken -> +22.0 points, half-width 1.96 * sqrt((0.28 - 0.0484)
    # / 200) = 6.67 points; McNemar: 2 * P(Binomial(56, 1/2) <= 6) = 1.02e-9
    p_value = 2 * sum(math.comb(56, i) for i in range(7)) / 2 ** 56
    results["gain_pass_at_1_ci"] = {"gain": 0.22, "low": 0.1533, "high": 0.2867, "fixed": 50,
                                    "broken": 6, "n": 200, "p_value": p_value}
    (run_dir / "results.json").write_text(json.dumps(results))
    page = write_run_report(run_dir).read_text()
    assert ("pass@1 (greedy): 47.5% &rarr; 69.5% (+22.0 points; 95% CI +15.3 to +28.7; "
            "50 fixed, 6 broken of 200; McNemar p 1e-09)") in page


def test_settings_and_partial_metrics(run_dir):
    page = write_run_report(run_dir).read_text()
    for cell in ("synthetic-run", "<td>seed</td><td>7</td>", "tiny-random", "arithmetic",
                 "<td>GRPO steps</td><td>12</td>", "<td>prompts per step</td><td>8</td>",
                 "<td>group size</td><td>4</td>", "<td>learning rate</td><td>1e-05</td>",
                 "<td>KL coefficient</td><td>0.02</td>"):
        assert cell in page
    assert "metrics.jsonl: skipped 1 line(s) that are not JSON objects" in page
    assert "GRPO steps logged: 12 (last 12)" in page


def test_samples_are_escaped_and_broken_down(run_dir):
    page = write_run_report(run_dir).read_text()
    assert "<script" not in page  # no JavaScript at all, and the completion is escaped
    assert html.escape(XSS) in page
    samples = page[page.index('id="samples"'):]
    assert re.findall(r"<h3>step (\d+)</h3>", samples) == ["1", "6", "10"]
    assert samples.count('<div class="sample">') == 12  # 4 per step
    assert ("<b>reward</b> 1.000 | <b>components</b> outcome 1.000, format 1.000 | "
            "<b>status</b> correct | <b>extracted</b> 1 | <b>category</b> 2d+2d") in samples
    assert "step 10 sample 3" in samples and "step 10 sample 4" not in samples
    assert "<b>id</b> arith-6 | <b>reference</b> 1 | <b>reward</b> 1.000" in samples


def test_missing_files_say_not_recorded(tmp_path):
    d = tmp_path / "partial"
    d.mkdir()
    _jsonl(d / "metrics.jsonl", [{"step": 1, "reward_mean": 0.1}, {"step": 2, "reward_mean": 0.3}])
    page = write_run_report(d).read_text()
    for text in ("config.yaml: not recorded", "validation results: not recorded",
                 "validation.jsonl: not recorded", "alerts.jsonl: not recorded",
                 "samples.jsonl: not recorded", "wall time: not recorded",
                 "KL divergence to the reference (no kl in metrics.jsonl): not recorded"):
        assert text in page
    assert sorted(_images(page)) == [CURVE_TITLES[0]]


def test_results_only_and_validation_fallback(tmp_path, run_dir):
    d = tmp_path / "results_only"
    d.mkdir()
    shutil.copy(run_dir / "results.json", d)
    page = write_run_report(d).read_text()
    assert "metrics.jsonl: not recorded" in page and "47.5% &rarr; 69.5%" in page
    assert _images(page) == {}

    (run_dir / "results.json").unlink()  # an unfinished run: rows come from validation.jsonl
    page = write_run_report(run_dir).read_text()
    assert "results.json not recorded" in page and "47.5% &rarr; 69.5%" in page
    assert "sampled pass@k: not recorded" in page


def test_not_a_run_dir_raises(tmp_path):
    with pytest.raises(ValueError, match=re.escape(str(tmp_path))):
        write_run_report(tmp_path)
    with pytest.raises(ValueError, match="nope"):
        write_run_report(tmp_path / "nope")
    assert not (tmp_path / "report.html").exists()


def test_cli(run_dir, tmp_path):
    out = tmp_path / "elsewhere" / "r.html"
    result = runner.invoke(app, ["report", str(run_dir), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out) and out.read_text().startswith("<!DOCTYPE html>")

    missing = tmp_path / "no_such_run"
    result = runner.invoke(app, ["report", str(missing)])
    assert result.exit_code == 2
    assert "error:" in result.output and str(missing) in result.output.replace("\n", "")


# -- part 2: a real smoke run rendered in headless Chromium ---------------------------------------
CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="`chromium` is not installed "
                                    "(apt-get install chromium; scripts/setup.sh does it as root)")
# Runs after the page (and so every image) has loaded. For each <img>: loaded, a non-zero
# natural size, and every pixel opaque when drawn on a canvas. The report's PNGs are opaque by
# construction (checked above), so transparent pixels mean a partial decode: a truncated or
# corrupted PNG stream that Chromium rendered only in part. Garbage or invalid base64 gives a
# natural size of 0.
IMAGE_PROBE = """<script>
window.addEventListener('load', () => {
  const out = Array.from(document.images).map((img) => {
    const r = {alt: img.alt, complete: img.complete, w: img.naturalWidth,
               h: img.naturalHeight, transparent: null};
    if (r.complete && r.w > 0 && r.h > 0) {
      const c = document.createElement('canvas');
      c.width = r.w; c.height = r.h;
      const g = c.getContext('2d');
      g.drawImage(img, 0, 0);
      const d = g.getImageData(0, 0, r.w, r.h).data;
      let t = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] !== 255) t++;
      r.transparent = t;
    }
    return r;
  });
  const p = document.createElement('pre');
  p.id = 'imgcheck';
  p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
});
</script>"""


@pytest.fixture(scope="module")
def smoke_report(tmp_path_factory) -> Path:
    """The smoke preset trained for 2 GRPO steps, then `rlvr report` on its run directory."""
    run_dir = tmp_path_factory.mktemp("smoke") / "run"
    result = runner.invoke(app, ["train", "--config", str(REPO / "configs" / "smoke.yaml"),
                                 "-o", str(run_dir), "--set", "grpo.steps=2"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(run_dir / "report.html")
    return run_dir / "report.html"


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
               "--v=0", f"--user-data-dir={tmp_path / 'chromium-profile'}", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _console_lines(stderr: str) -> list[str]:
    """Page console output: Chromium logs every console message (all levels, uncaught errors)
    as `[pid:tid:time:INFO:CONSOLE:line] "text", source: URL (line)`; the level is not shown,
    so any line counts - the report has no JavaScript and should log nothing."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def _image_check(page: Path, tmp_path: Path) -> list[dict]:
    """Chromium's verdict on every <img> of ``page`` (see IMAGE_PROBE)."""
    probe = tmp_path / f"probe-{page.name}"
    probe.write_text(page.read_text().replace("</body>", IMAGE_PROBE + "\n</body>"))
    result = _chromium(tmp_path, "--dump-dom", probe.as_uri())
    assert not _console_lines(result.stderr), _console_lines(result.stderr)
    found = re.search(r'<pre id="imgcheck">(.*?)</pre>', result.stdout, re.S)
    assert found, "the image probe did not run: " + result.stdout[-500:]
    return json.loads(html.unescape(found.group(1)))


def _broken(images: list[dict]) -> list[str]:
    return [i["alt"] for i in images
            if not (i["complete"] and i["w"] > 0 and i["h"] > 0 and i["transparent"] == 0)]


def test_smoke_report_has_the_run(smoke_report):
    page = smoke_report.read_text()
    assert "Training report: smoke" in page and "pass@1 (greedy)" in page
    images = _images(page)
    for title in ("Reward per step (mean over completions)", "Completion length and truncation",
                  "KL divergence to the reference", "Clip fraction", "Zero-variance groups",
                  "Validation pass@1"):
        assert title in images


@needs_chromium
def test_smoke_report_renders_in_chromium(smoke_report, tmp_path):
    shot = tmp_path / "report.png"
    result = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,4000",
                       "--hide-scrollbars", smoke_report.as_uri())
    assert not _console_lines(result.stderr), _console_lines(result.stderr)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 4000)
    pixels = image.width * image.height
    non_white = sum(n for n, px in image.getcolors(pixels) if min(px) < 245)
    assert non_white / pixels > 0.03, f"screenshot nearly blank ({non_white / pixels:.2%})"
    assert len(image.getcolors(pixels)) > 100

    images = _image_check(smoke_report, tmp_path)
    assert len(images) == smoke_report.read_text().count("<img") >= 6
    assert _broken(images) == []


@needs_chromium
def test_chromium_check_catches_corrupt_images(smoke_report, tmp_path):
    page = smoke_report.read_text()
    payloads = [payload for _, payload in IMG.findall(page)]
    truncated = payloads[0][: len(payloads[0]) // 2 // 4 * 4]  # valid base64, half a PNG
    garbage = "A" * len(payloads[1])  # valid base64, not a PNG
    middle = len(payloads[2]) // 2  # bytes overwritten mid-stream (a corrupt IDAT)
    overwritten = payloads[2][:middle] + "QUJD" * 4 + payloads[2][middle + 16:]
    broken = tmp_path / "broken.html"
    broken.write_text(page.replace(payloads[0], truncated, 1).replace(payloads[1], garbage, 1)
                      .replace(payloads[2], overwritten, 1))
    images = _image_check(broken, tmp_path)
    assert _broken(images) == [i["alt"] for i in images[:3]]


def test_episode_trajectories_mark_environment_spans_not_trained(tmp_path):
    run = tmp_path / "multi"
    run.mkdir()
    (run / "config.yaml").write_text("name: multi\nenv:\n  name: tool\n  max_turns: 3\n"
                                     "  tools: [calculator]\n")
    metrics = [{"step": s, "reward_mean": 0.1 * s, "episode_turns_mean": 1.5,
                "episode_tool_calls_mean": 0.5, "tool_error_rate": 0.25,
                "finish_rate/stop": 0.75, "finish_rate/length": 0.25,
                "reward_mean_tool_use": 0.5, "reward_mean_no_tool_use": 0.2} for s in (1, 2)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    trajectory = [{"role": "assistant", "text": "<calculator>6*7</calculator>", "trained": True,
                   "tokens": 9},
                  {"role": "tool", "text": XSS, "trained": False, "tokens": 12},
                  {"role": "assistant", "text": "#### 42", "trained": True, "tokens": 4}]
    (run / "samples.jsonl").write_text(json.dumps(
        {"step": 1, "id": "m1", "reward": 1.1, "status": "correct", "trajectory": trajectory,
         "turns": 2, "tool_calls": 1, "finish_reason": "stop"}) + "\n")
    page = write_run_report(run).read_text()
    assert "<script" not in page and html.escape(XSS) in page
    samples = page[page.index('id="samples"'):]
    assert samples.count('<div class="segment trained">') == 2
    assert samples.count('<div class="segment env">') == 1
    assert "tool: environment, not trained, 12 tokens" in samples
    assert "assistant: trained, 9 tokens" in samples
    assert "<b>turns</b> 2 | <b>tool_calls</b> 1 | <b>finish_reason</b> stop" in samples
    assert "<td>environment</td><td>tool, max 3 turns, tools calculator</td>" in page
    titles = [html.unescape(alt) for alt, _ in IMG.findall(page)]
    for title in ("Turns and tool calls per episode", "How episodes ended",
                  "Reward with and without tool use"):
        assert title in titles
