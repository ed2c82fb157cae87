"""The serving benchmarks' own machinery on the tiny export: serve_engine_round's price of the batch's padding.
No timing is asserted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _benchmarks_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO))


def test_width_cost_fits_the_steps_to_a_line_and_leaves_the_batch_empty(
    tiny_export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import benchmarks.serve_engine_round as engine_round
    from gpt2_onnx_runtimes.batching import BatchEngine

    engine = BatchEngine.load(tiny_export)
    measured = engine_round.step_ms(engine, 8, rows=3)  # a real step of 3 rows over 8 positions
    assert measured > 0 and engine._batch.rows == 0
    monkeypatch.setattr(engine_round, "step_ms", lambda _engine, width: 5.0 + 0.25 * width)
    medians, fixed, per_position = engine_round.width_cost(engine, repeats=2)
    assert list(medians) == list(engine_round.WIDTHS)
    assert np.isclose(fixed, 5.0) and np.isclose(per_position, 0.25)
