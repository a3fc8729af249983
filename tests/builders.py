"""Builders for the tests of model=py (tests/config/test_your_model.py,
tests/unit/test_own_models.py): each one wrong in its own way."""

from __future__ import annotations

from typing import Any


def returns_none(framework: str, num_classes: int, input_shape: tuple[int, ...]) -> Any:
    return None


def raises(framework: str, num_classes: int, input_shape: tuple[int, ...]) -> Any:
    raise ValueError(f"no model with {num_classes} classes\nat all")


def torch_model(framework: str, num_classes: int, input_shape: tuple[int, ...]) -> Any:
    """A torch model whatever the framework asked for."""
    import torch

    return torch.nn.Linear(input_shape[-1], num_classes)


def no_keywords() -> Any:
    return None


NOT_A_FUNCTION = 3
