"""The report's Time-to-accuracy section, from recorded goal=accuracy runs: time and epochs
to the target per framework, a "did not reach" row, and the pair's verdict with the factor
that decides it."""

from __future__ import annotations

from bench.report import build, render
from tests.report_data import record, runset


def _run(framework: str, seed: int, per_epoch_s: float, epochs: float, reached: bool = True):  # noqa: ANN202
    evals = int(epochs / 0.5)
    accuracy = [(i + 1, 0.5 + 0.45 * (i + 1) / evals) for i in range(evals)]
    elapsed = [(i + 1, (i + 1) * 0.5 * per_epoch_s * 1.1) for i in range(evals)]
    metrics = {"target_reached": 1.0 if reached else 0.0, "best_test_accuracy": accuracy[-1][1]}
    if reached:
        metrics |= {
            "time_to_target_s": elapsed[-1][1],
            "epochs_to_target": epochs,
            "train_time_to_target_s": per_epoch_s * epochs,
        }
    return record(
        framework,
        "lenet5",
        num_parameters=62006,
        repeat=seed,
        params={
            "data.name": "digits",
            "goal.name": "accuracy",  # goal.target at its default, 0.95: not a param
            "seed": str(seed),
        },  # fmt: skip
        metrics=metrics,
        history={"test_accuracy": accuracy, "eval_elapsed_s": elapsed},
    )


def test_the_section_compares_time_to_target_and_says_what_decides() -> None:
    runs = [_run("torch", s, 10.0 + 0.1 * s, 3.0 + 0.5 * (s % 2)) for s in range(5)]
    # tf: the same time per epoch, twice the epochs: epochs decide; one seed never got there
    runs += [_run("tf", s, 10.0 + 0.1 * s, 6.0 + 0.5 * (s % 2)) for s in range(4)]
    runs += [_run("tf", 4, 10.0, 12.0, reached=False)]
    import matplotlib.pyplot as plt

    open_before = plt.get_fignums()
    doc = build(runset(runs))
    assert plt.get_fignums() == open_before  # the figure is drawn without pyplot: none left open
    text = render.to_markdown(doc)
    assert "## Time to accuracy" in text
    assert "did not reach (1; best" in text
    line = next(row for row in text.splitlines() if "| torch vs tf |" in row)
    assert "| faster to the target |" in line and line.endswith("| epochs to target |")
    assert "| tf | 4/5 |" in text and "| torch | 5/5 |" in text
    figures = [
        f for s in doc.sections for f in s.blocks if getattr(f, "name", "").startswith("time-to")
    ]  # noqa: E501
    assert figures and figures[0].png.startswith(b"\x89PNG")
    assert figures[0].caption.startswith("Held-out accuracy against wall time, data.name=digits")
    assert " · target 0.95: " in figures[0].caption  # the default target (it said "target nan")
