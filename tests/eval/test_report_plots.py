"""The eval plots: legends name models by run and checkpoint, not by full paths, and every
curve's 95% confidence interval is drawn as a shaded band."""

import pytest

pytest.importorskip("matplotlib")

from rlvr.eval.report import PLOTS, figures, plot, short_names

KS = [1, 2, 4]


def _summary(base: float) -> dict:
    curve = {str(k): base + 0.1 * i for i, k in enumerate(KS)}
    return {"ks": KS, "pass@k": curve, "maj@k": {k: v / 2 for k, v in curve.items()},
            "ci95": {"pass@k": {k: [v - 0.05, v + 0.05] for k, v in curve.items()},
                     "maj@k": {k: [v / 2 - 0.02, v / 2 + 0.02] for k, v in curve.items()}},
            "cost": {str(k): {"tokens_per_problem": 10.0 * k} for k in KS}}


MODELS = ["/home/me/runs/arith-20250101/checkpoints/step-000040",
          "/home/me/runs/arith-20250101/sft_model", "tiny-random"]


def test_short_names_are_run_and_checkpoint_and_unique():
    assert short_names(MODELS) == {MODELS[0]: "arith-20250101/step-40",
                                   MODELS[1]: "arith-20250101/sft_model",
                                   "tiny-random": "tiny-random"}
    twins = ["/a/x/run/checkpoints/step-000010", "/b/x/run/checkpoints/step-000010"]
    assert short_names(twins) == {twins[0]: "a/x/run/step-10", twins[1]: "b/x/run/step-10"}
    assert short_names(["org/model", "model"]) == {"org/model": "org/model", "model": "model"}


def test_plots_use_short_legends_and_draw_the_ci95_bands(tmp_path):
    import matplotlib.pyplot as plt

    results = {"models": {m: _summary(0.1 * i) for i, m in enumerate(MODELS)},
               "settings": {"tasks": "arithmetic"}, "problems": 8}
    figs = figures(results)
    assert list(figs) == list(PLOTS)
    for fig in figs.values():
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [
            f"{name} {metric}" for name in ("arith-20250101/step-40", "arith-20250101/sft_model",
                                            "tiny-random") for metric in ("pass@k", "maj@k")]
        bands = {c.get_gid(): c for c in ax.collections if (c.get_gid() or "").startswith("ci95")}
        assert len(bands) == 6
        ys = bands["ci95 arith-20250101/step-40 pass@k"].get_paths()[0].vertices[:, 1]
        assert ys.min() == pytest.approx(0.0 - 0.05) and ys.max() == pytest.approx(0.2 + 0.05)
        plt.close(fig)
    assert [p.name for p in plot(results, tmp_path)] == list(PLOTS)
    assert all((tmp_path / name).stat().st_size > 0 for name in PLOTS)


def test_category_table_at_k_1_has_one_pass_at_1_column():
    from rlvr.eval.records import EvalSample, Generated, ProblemResult
    from rlvr.eval.report import markdown
    from rlvr.eval.summary import summarize

    def problem(pid, status):
        sample = EvalSample(Generated("..."), float(status == "correct"), status, "1")
        return ProblemResult(id=pid, task_type="math", reference="1", samples=[sample],
                             requested=1, category="easy")

    summary = summarize([problem("a", "correct"), problem("b", "wrong"),
                         problem("c", "correct"), problem("d", "correct")], [1])
    text = markdown({"settings": {"tasks": "arithmetic"}, "models": {"m": summary}, "ks": [1],
                     "problems": 4, "samples_per_problem": 1})
    table = text.split("## By category")[1].strip().splitlines()
    assert [c.strip() for c in table[0].strip("|").split("|")] == [
        "model", "category", "problems", "pass@1", "maj@1"]
    assert [c.strip() for c in table[2].strip("|").split("|")] == [
        "m", "easy", "4", "75.0%", "75.0%"]
