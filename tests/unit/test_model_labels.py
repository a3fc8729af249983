"""A model that is not the zoo's is named with its source (``hf:llama``,
``torchvision:resnet50``, ``py:MODULE:FUNCTION``) in the report's tables and the sweep's
summary, so that two different networks never share one name (issue 32)."""

from __future__ import annotations

import pytest

from bench.core.zoo import model_label
from bench.report import build
from bench.report.document import Report, Table
from tests.report_data import record, runset


@pytest.mark.parametrize(
    ("flat", "label"),
    [
        ({"model.name": "resnet50"}, "resnet50"),  # a run logged before model.source
        ({"model.name": "resnet50", "model.source": "bench"}, "resnet50"),
        ({"model.name": "resnet50", "model.source": "stock"}, "stock:resnet50"),
        ({"model.name": "resnet18", "model.source": "flax"}, "flax:resnet18"),
        ({"model.name": "resnet50", "model.source": "torchvision"}, "torchvision:resnet50"),
        ({"model.name": "EfficientNetV2S", "model.source": "keras"}, "keras:EfficientNetV2S"),
        ({"model.name": "llama", "model.source": "hf"}, "hf:llama"),
        ({"model.name": "resnet50d", "model.source": "timm"}, "timm:resnet50d"),
        (
            {"model.name": "py", "model.source": "py", "model.builder": "mypkg.nets:build"},
            "py:mypkg.nets:build",
        ),
        (
            {"model.name": "py", "model.source": "py", "model.torch": "m:bt", "model.tf": "m:bk"},
            "py:m:bt,m:bk",
        ),
        (  # a name of the user's own is the label they chose
            {"model.name": "cnn", "model.source": "py", "model.builder": "mypkg.nets:build"},
            "py:cnn",
        ),
    ],
)
def test_a_models_label_names_its_source_unless_it_is_the_zoos(
    flat: dict[str, str], label: str
) -> None:
    assert model_label(flat) == label


def _tables(report: Report, title: str) -> list[Table]:
    section = next(s for s in report.sections if s.title == title)
    return [b for b in section.blocks if isinstance(b, Table)]


def test_the_report_names_the_zoos_resnet50_and_torchvisions_apart() -> None:
    """Three networks, one model.name: the zoo's resnet50, torchvision's, and an LM."""
    runs = []
    for repeat in range(2):
        for framework in ("torch", "tf"):
            runs.append(record(framework, repeat=repeat, params={"model.source": "bench"}))
            runs.append(
                record(
                    framework,
                    "llama",
                    repeat=repeat,
                    num_parameters=6_293_760,
                    params={"model.source": "hf", "model.layers": "4"},
                )
            )
        runs.append(
            record(
                "torch",
                repeat=repeat,
                rate=90.0,
                num_parameters=25_557_032,
                params={"model.source": "torchvision"},
            )
        )
    report = build(runset(runs))
    overview = report.sections[0].blocks[0]
    assert isinstance(overview, str)
    assert "models: hf:llama, resnet50, torchvision:resnet50." in overview
    training = _tables(report, "Relative training time")[0]
    labels = sorted(row[0].text.split(" · ")[0] for row in training.rows)
    assert labels == ["hf:llama", "resnet50"]  # torchvision's has no tf side to compare
    assert not any("model.source" in cell.text for row in training.rows for cell in row)
    epochs = _tables(report, "Time per epoch and samples/s")[0]
    assert sorted({(row[0].text, row[1].text) for row in epochs.rows}) == [
        ("tf", "hf:llama"),
        ("tf", "resnet50"),
        ("torch", "hf:llama"),
        ("torch", "resnet50"),
        ("torch", "torchvision:resnet50"),
    ]


def test_a_pair_that_differs_in_the_source_names_the_model_bare() -> None:
    """The zoo's resnet50 against its stock twin: the pair's configuration names resnet50,
    the compared key the two sources."""
    runs = [
        record("torch", repeat=r, rate=rate, params={"model.source": source})
        for r in range(4)
        for source, rate in (("bench", 100.0), ("stock", 80.0))
    ]
    report = build(runset(runs))
    (row,) = _tables(report, "Other compared pairs")[0].rows
    assert row[0].text == "training time, model.source stock vs bench"
    assert row[1].text == "torch · resnet50 · batch 32 · 32 px · cpu"
