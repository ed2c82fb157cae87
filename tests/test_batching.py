"""gpt2_onnx_runtimes.batching without a server: rows joining and leaving the running batch give each request
exactly what it gets alone (Generation, as ``gpt2-onnx run`` runs it), and the engine's limits hold."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpt2_onnx_core.errors import InvalidInputError, ServerBusyError
from gpt2_onnx_core.names import PREFILL
from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from gpt2_onnx_runtimes.batch_cache import RunningBatch
from gpt2_onnx_runtimes.batch_requests import ChoiceUpdate, CompletionSpec, Update
from gpt2_onnx_runtimes.batching import BatchEngine, EngineOptions
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from tests.conftest import move_eos

PROMPTS = [
    "Hello",
    "The quick brown fox jumps over the lazy dog and runs into the forest",
    "In a shocking finding, scientists",
    "A",
    "Once upon a time in a land far away there lived a king who had three daughters",
]


@pytest.fixture
def engine(tiny_export: Path) -> BatchEngine:
    return BatchEngine.load(tiny_export, options=EngineOptions(max_rows=8, trim_columns=1))


def spec(model: Gpt2Onnx, prompt: str, new: int, logprobs: int | None = None, **options: Any) -> CompletionSpec:
    """A request for ``new`` tokens past end-of-text, with these GenerationOptions."""
    chosen = GenerationOptions(max_new_tokens=new, **{"ignore_eos": True, **options})
    return CompletionSpec(tuple(model.encode(prompt)), chosen, logprobs)


def drive(engine: BatchEngine, schedule: Sequence[tuple[int, CompletionSpec]]) -> list[list[Update]]:
    """Submit each spec before the engine's step number given with it; run until everything finished."""
    updates: list[list[Update]] = [[] for _ in schedule]
    pending = sorted(range(len(schedule)), key=lambda i: schedule[i][0])
    step = 0
    while True:
        while pending and schedule[pending[0]][0] <= step:
            index = pending.pop(0)
            engine.submit(schedule[index][1], updates[index].append)
        more = engine.step()
        step += 1
        if not more and not pending:
            return updates
        assert step < 10_000


def alone(model: Gpt2Onnx, s: CompletionSpec, choice: int = 0) -> Any:
    """What ``gpt2-onnx run`` gives for the request's prompt and options (its sequence ``choice``)."""
    return model.generate(model.decode(s.prompt_ids), s.options)[choice]


def tokens(updates: list[Update], choice: int = 0) -> list[int]:
    return [u.token_id for u in updates if isinstance(u, ChoiceUpdate) and u.choice == choice]


def text(updates: list[Update], choice: int = 0) -> str:
    return "".join(u.text for u in updates if isinstance(u, ChoiceUpdate) and u.choice == choice)


SAMPLED = {"do_sample": True, "temperature": 0.9, "top_p": 0.9, "seed": 11}
SCHEDULES = {
    # (step of arrival, prompt, new tokens, sampled): longer prompts joining shorter ones pad the running rows,
    # shorter ones are padded themselves; different lengths make rows leave while others go on
    "together": [(0, 0, 9, False), (0, 1, 12, True), (0, 2, 5, False)],
    "longer-joins": [(0, 0, 10, False), (2, 1, 8, False), (4, 4, 6, True)],
    "shorter-joins": [(0, 4, 12, False), (1, 3, 10, True), (3, 0, 4, False), (6, 2, 9, False)],
    "after-a-leave": [(0, 2, 3, False), (0, 1, 14, True), (5, 3, 6, False), (9, 4, 5, False)],
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_joining_and_leaving_rows_get_what_they_get_alone(model: Gpt2Onnx, engine: BatchEngine, name: str) -> None:
    schedule = [
        (at, spec(model, PROMPTS[p], new, **(SAMPLED if sampled else {}))) for at, p, new, sampled in SCHEDULES[name]
    ]
    results = drive(engine, schedule)
    for (_, s), updates in zip(schedule, results, strict=True):
        expected = alone(model, s)
        assert tokens(updates) == expected.token_ids
        assert text(updates) == expected.text
        last = updates[-1]
        assert isinstance(last, ChoiceUpdate) and last.finish_reason == "length" and last.final_text == expected.text
    assert engine.stats().rows == 0


def test_a_step_binds_only_its_tokens_while_the_batch_keeps_its_shape(
    model: Gpt2Onnx, tiny_export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The in-place batch binds its cache, constants and logits buffer once and keeps the binding until a join, a
    leave, a trim or a layout changes what it points at; every step's logprobs are those of binding each step
    anew, bit for bit."""
    schedule = [(at, spec(model, PROMPTS[p], new, logprobs=2)) for at, p, new, _ in SCHEDULES["after-a-leave"]]
    binds = []
    real_bind = RunningBatch._bind

    def counted(self: RunningBatch, *args: Any, **kwargs: Any) -> Any:
        binds.append(self.rows)
        return real_bind(self, *args, **kwargs)

    monkeypatch.setattr(RunningBatch, "_bind", counted)
    kept = drive(BatchEngine.load(tiny_export, options=EngineOptions(max_rows=8, trim_columns=1)), schedule)
    steps = max(len(updates) for updates in kept)
    assert 1 < len(binds) < steps / 2, f"{len(binds)} bindings over {steps} steps"
    monkeypatch.setattr(RunningBatch, "_kept_binding", lambda *_: None)
    fresh = drive(BatchEngine.load(tiny_export, options=EngineOptions(max_rows=8, trim_columns=1)), schedule)
    assert kept == fresh
    for (_, s), updates in zip(schedule, kept, strict=True):
        assert tokens(updates) == alone(model, s).token_ids


@pytest.mark.parametrize("name", ["longer-joins", "after-a-leave"])
def test_the_copied_cache_gets_what_generation_gets_on_decode_onnx_graph(tiny_export: Path, name: str) -> None:
    """With the in-place cache off (decode.onnx's concatenating attention) the batch keeps its cache in two
    buffers that swap (CopiedCache); rows joining, padding and leaving still get what they get alone."""
    runtime = RuntimeOptions(in_place_kv="off")
    model = Gpt2Onnx.load(tiny_export, options=runtime)
    engine = BatchEngine.load(tiny_export, runtime, EngineOptions(max_rows=8, trim_columns=1))
    assert not engine.loaded.steps.in_place and not model._loaded.steps.in_place
    schedule = [
        (at, spec(model, PROMPTS[p], new, **(SAMPLED if sampled else {}))) for at, p, new, sampled in SCHEDULES[name]
    ]
    for (_, s), updates in zip(schedule, drive(engine, schedule), strict=True):
        assert tokens(updates) == alone(model, s).token_ids


def test_finished_rows_leave_and_unused_padding_is_trimmed(model: Gpt2Onnx, engine: BatchEngine) -> None:
    assert engine.loaded.steps.in_place, "the default engine runs the in-place cache"
    long, short = spec(model, PROMPTS[4], 3), spec(model, PROMPTS[0], 12)
    engine.submit(long, lambda update: None)
    engine.submit(short, lambda update: None)
    engine.step()  # both prefilled and joined (the short row left-padded to the long one's length), one step
    assert engine.stats().rows == 2 and engine.stats().length == len(long.prompt_ids) + 1
    engine.step()  # the long row finished and left; the columns only it needed are dropped
    assert engine.stats().rows == 1 and engine.stats().length == len(short.prompt_ids) + 2


def test_choices_share_one_prefill_and_are_seeded_as_run_seeds_them(model: Gpt2Onnx, engine: BatchEngine) -> None:
    s = spec(model, PROMPTS[2], 10, **{**SAMPLED, "seed": 5, "num_return_sequences": 3})
    (updates,) = drive(engine, [(0, s)])
    for choice in range(3):
        assert tokens(updates, choice) == alone(model, s, choice).token_ids
    assert len({tuple(tokens(updates, c)) for c in range(3)}) > 1, "choices with different seeds differ"


def test_stop_strings_end_a_choice_as_generation_does(model: Gpt2Onnx, engine: BatchEngine) -> None:
    full = alone(model, spec(model, PROMPTS[2], 12))
    stop = full.text[len(full.text) // 2 :][:4]
    s = spec(model, PROMPTS[2], 12, stop=(stop,))
    (updates,) = drive(engine, [(0, s), (1, spec(model, PROMPTS[1], 6))])[:1]
    expected = alone(model, s)
    assert expected.finish_reason == "stop"
    assert tokens(updates) == expected.token_ids and text(updates) == expected.text
    assert isinstance(updates[-1], ChoiceUpdate) and updates[-1].finish_reason == "stop"


def test_end_of_text_ends_a_choice(model: Gpt2Onnx, tmp_path: Path) -> None:
    greedy = alone(model, spec(model, PROMPTS[2], 10)).token_ids
    end = next(i for i, token in enumerate(greedy) if i > 0 and token not in greedy[:i])
    folder = move_eos(model._loaded.folder, greedy[end], tmp_path / "moved")  # a later greedy token ends the text
    engine = BatchEngine.load(folder)
    (updates,) = drive(engine, [(0, spec(model, PROMPTS[2], 10, ignore_eos=False))])
    assert tokens(updates) == greedy[: end + 1]
    assert isinstance(updates[-1], ChoiceUpdate) and updates[-1].finish_reason == "eos"


def test_greedy_logprobs_are_the_models_log_softmax(model: Gpt2Onnx, engine: BatchEngine, tiny_export: Path) -> None:
    s = spec(model, PROMPTS[1], 1, logprobs=3)
    (updates,) = drive(engine, [(0, s)])
    update = updates[0]
    assert isinstance(update, ChoiceUpdate) and update.top_logprobs is not None
    ids = np.asarray([s.prompt_ids], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(ids.shape[1])[None]}
    logits = engine.loaded.run(PREFILL, feeds)["logits"][0, -1].astype(np.float64)  # the folder's own prefill graph
    expected = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
    best = np.argsort(-expected)[:3]
    assert [t for t, _ in update.top_logprobs] == best.tolist() and update.token_id == best[0]
    np.testing.assert_allclose([v for _, v in update.top_logprobs], expected[best], atol=1e-4)
    assert update.logprob == pytest.approx(expected[best[0]], abs=1e-4)


def test_log_probabilities_are_computed_only_for_requests_that_want_them(model: Gpt2Onnx, engine: BatchEngine) -> None:
    """A request that reports none and ranks no draws gets NaN (the pass over the vocabulary skipped); one asking
    for them, or drawing more than it returns (best_of), gets them, with the same tokens."""
    plain, reported = spec(model, PROMPTS[1], 3), spec(model, PROMPTS[1], 3, logprobs=0)
    ranked = spec(model, PROMPTS[1], 3, do_sample=True, seed=3, best_of=2, num_return_sequences=1)
    assert (plain.wants_logprobs, reported.wants_logprobs, ranked.wants_logprobs) == (False, True, True)
    without, with_them, drawn = drive(engine, [(0, plain), (0, reported), (0, ranked)])
    assert tokens(without) == tokens(with_them)
    assert all(isinstance(u, ChoiceUpdate) and np.isnan(u.logprob) for u in without)
    assert all(isinstance(u, ChoiceUpdate) and np.isfinite(u.logprob) for u in with_them + drawn)


def test_rows_beyond_max_rows_wait_their_turn(model: Gpt2Onnx, tiny_export: Path) -> None:
    engine = BatchEngine.load(tiny_export, options=EngineOptions(max_rows=2))
    schedule = [(0, spec(model, p, 6)) for p in PROMPTS]
    seen: list[int] = []
    original = engine.step

    def step() -> bool:
        more = original()
        seen.append(engine.stats().rows)
        return more

    engine.step = step  # type: ignore[method-assign]  # watch the batch between steps
    results = drive(engine, schedule)
    assert max(seen) == 2
    for (_, s), updates in zip(schedule, results, strict=True):
        assert tokens(updates) == alone(model, s).token_ids


def test_a_full_queue_refuses_at_once(model: Gpt2Onnx, tiny_export: Path) -> None:
    engine = BatchEngine.load(tiny_export, options=EngineOptions(max_waiting=1))
    engine.submit(spec(model, "Hello", 4), lambda update: None)
    with pytest.raises(ServerBusyError, match="busy"):
        engine.submit(spec(model, "Hello", 4), lambda update: None)


def test_requests_the_model_cannot_run_are_refused(model: Gpt2Onnx, engine: BatchEngine) -> None:
    with pytest.raises(InvalidInputError, match="exceeds the model's 128 positions"):
        engine.submit(spec(model, PROMPTS[1], 128), lambda update: None)
    with pytest.raises(InvalidInputError, match="outside"):
        engine.submit(CompletionSpec((50257,), GenerationOptions(max_new_tokens=4)), lambda update: None)
    with pytest.raises(InvalidInputError, match="at most 8"):
        engine.submit(spec(model, "Hello", 4, do_sample=True, num_return_sequences=9), lambda update: None)


def test_a_cancelled_request_leaves_and_the_others_go_on(model: Gpt2Onnx, engine: BatchEngine) -> None:
    kept, dropped = spec(model, PROMPTS[1], 10), spec(model, PROMPTS[4], 10)
    kept_updates: list[Update] = []
    dropped_updates: list[Update] = []
    engine.submit(kept, kept_updates.append)
    ticket = engine.submit(dropped, dropped_updates.append)
    engine.step()
    engine.step()
    ticket.cancel()
    heard = len(dropped_updates)
    while engine.step():
        pass
    assert len(dropped_updates) == heard
    assert tokens(kept_updates) == alone(model, kept).token_ids


def test_the_loop_thread_serves_many_threads(model: Gpt2Onnx, tiny_export: Path) -> None:
    engine = BatchEngine.load(tiny_export, options=EngineOptions(max_rows=4))
    engine.start()
    specs = [spec(model, PROMPTS[i % len(PROMPTS)], 4 + i) for i in range(8)]
    results: list[list[Update]] = [[] for _ in specs]
    done = [threading.Event() for _ in specs]

    def sink(index: int) -> Any:
        def take(update: Update) -> None:
            results[index].append(update)
            if isinstance(update, ChoiceUpdate) and update.finish_reason:
                done[index].set()

        return take

    threads = [threading.Thread(target=engine.submit, args=(s, sink(i))) for i, s in enumerate(specs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(event.wait(60) for event in done)
    engine.close()
    assert not engine.alive
    for s, updates in zip(specs, results, strict=True):
        assert tokens(updates) == alone(model, s).token_ids


@pytest.mark.parametrize("in_place", [False, True], ids=["copied", "in-place"])
def test_running_batch_rows_join_leave_and_trim_like_numpy(in_place: bool) -> None:
    rng = np.random.default_rng(0)
    batch = RunningBatch(count=2, n_head=2, head_dim=3, in_place=in_place, max_positions=32)
    a = rng.standard_normal((2, 1, 2, 4, 3)).astype(np.float32)  # (count, 1, nh, T, hs)
    b = rng.standard_normal((2, 1, 2, 6, 3)).astype(np.float32)
    c = rng.standard_normal((2, 1, 2, 2, 3)).astype(np.float32)
    batch.join(list(a))
    batch.join(list(b), copies=2)  # longer: row a is left-padded by 2; two choices of one prompt
    batch.join(list(c))  # shorter: padded itself
    kv = batch.kv()
    assert kv.shape == (2, 4, 2, 6, 3)
    np.testing.assert_array_equal(kv[:, 0, :, 2:], a[:, 0]) and np.testing.assert_array_equal(kv[:, 0, :, :2], 0)
    np.testing.assert_array_equal(kv[:, 1:3], np.repeat(b, 2, axis=1))
    np.testing.assert_array_equal(kv[:, 3, :, 4:], c[:, 0])
    np.testing.assert_array_equal(kv[:, 3, :, :4], 0)
    assert batch.mask.tolist() == [[0, 0, 1, 1, 1, 1], [1] * 6, [1] * 6, [0, 0, 0, 0, 1, 1]]
    assert batch.next_position.tolist() == [4, 6, 6, 2]
    order = batch.leave({1, 2})  # the long rows go; the last row moves into place 1
    assert order == [0, 3]
    np.testing.assert_array_equal(batch.kv()[:, 1, :, 4:], c[:, 0])
    assert batch.dead_columns() == 2
    batch.trim()
    assert batch.length == 4 and batch.mask.tolist() == [[1, 1, 1, 1], [0, 0, 1, 1]]
    np.testing.assert_array_equal(batch.kv()[:, 0], a[:, 0])
    np.testing.assert_array_equal(batch.kv()[:, 1, :, 2:], c[:, 0])


def test_a_kept_step_binding_is_told_apart_by_where_the_window_starts() -> None:
    """A trim with the same rows moves only the in-place window's first column: the step binding's key changes
    with it (a binding kept across it would point the graph at the dropped columns)."""
    rng = np.random.default_rng(2)
    batch = RunningBatch(count=2, n_head=2, head_dim=3, in_place=True, max_positions=32)
    batch.join(list(rng.standard_normal((2, 1, 2, 6, 3)).astype(np.float32)))  # (count, 1, nh, T, hs)
    batch.join(list(rng.standard_normal((2, 1, 2, 2, 3)).astype(np.float32)))
    batch.leave({0})
    before = batch._storage.binding_key(batch.rows)
    batch.trim()
    assert batch.rows == 1 and batch._storage.binding_key(batch.rows) != before
    assert RunningBatch(count=2, n_head=2, head_dim=3)._storage.binding_key(1) is None  # copied: never kept


def test_in_place_batch_keeps_rows_when_its_capacity_grows() -> None:
    """Rows joining past the capacity lay the cache out again; every row's positions survive the move."""
    rng = np.random.default_rng(1)
    batch = RunningBatch(count=2, n_head=2, head_dim=3, in_place=True, max_positions=256, max_rows=2)
    short = rng.standard_normal((2, 1, 2, 3, 3)).astype(np.float32)  # (count, 1, nh, T, hs)
    batch.join(list(short), copies=3)
    first = batch._storage.capacity  # type: ignore[attr-defined]
    long = rng.standard_normal((2, 1, 2, first + 5, 3)).astype(np.float32)
    batch.join(list(long))
    assert batch._storage.capacity > first  # type: ignore[attr-defined]
    kv = batch.kv()  # (count, 4, nh, first + 5, hs)
    for row in range(3):
        np.testing.assert_array_equal(kv[:, row, :, -3:], short[:, 0])
        np.testing.assert_array_equal(kv[:, row, :, :-3], 0)
    np.testing.assert_array_equal(kv[:, 3], long[:, 0])
    with pytest.raises(ValueError, match="at most 256 positions"):
        batch.join(list(rng.standard_normal((2, 1, 2, 257, 3)).astype(np.float32)))
