"""The roofline counts of the inputs a call was timed on (``harness.input_counts``' counters, named by
the definition's roofline spec), rebuilt on the CPU in the parent for the very seed the worker times
with (``harness.inputs.TIMED_TRIAL``). It runs where the candidate cannot reach it (never in the worker
the candidate runs in), so the floor check that rejects impossible times cannot be talked down.

Apart from the counter registry because it imports the input maker, which registers the operators,
which register their counters: the registry itself imports none of that."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from .input_counts import COUNTERS
from .roofline import input_counts, load_spec
from .schema import Definition, Workload


def timed_input_counts(definition: Definition, workload: Workload, *, seed: int, definition_path: Path | None = None,
                       config_overrides: dict[str, Any] | None = None, dataset_root: str | Path | None = None) -> dict[str, float] | None:
    """The spec's counts for the inputs the worker times ``workload`` on (run seed ``seed``), or None when
    the definition's roofline counts nothing from its inputs. Raises on anything it cannot count (the
    caller falls back to the spec's lower bounds and says why)."""
    if load_spec(definition).counter is None:
        return None  # before importing torch (harness.inputs)
    from .inputs import TIMED_TRIAL, seed_for

    return input_counts_for(definition, workload, input_seed=seed_for(seed, workload.uuid, TIMED_TRIAL), definition_path=definition_path,
                            config_overrides=config_overrides, dataset_root=dataset_root)


def input_counts_for(definition: Definition, workload: Workload, *, input_seed: int, definition_path: Path | None = None,
                     config_overrides: dict[str, Any] | None = None, dataset_root: str | Path | None = None) -> dict[str, float] | None:
    """The spec's counts for the inputs ``make_inputs`` builds with exactly ``input_seed`` (the profiler's
    driver builds its inputs so), or None when the roofline counts nothing from its inputs."""
    spec = load_spec(definition)
    if spec.counter is None:
        return None
    from .defconfig import load_config
    from .inputs import make_inputs  # imports torch and registers the operators' counters
    from .measure import refreshable_inputs

    if spec.counter not in COUNTERS:
        raise ValueError(f"{spec.source}: unknown input counter {spec.counter!r} (known: {sorted(COUNTERS)})")
    counter = COUNTERS[spec.counter]
    config = load_config(definition.name, definition_path, config_overrides or {})
    built = set(definition.inputs) if config.builder else set()
    moving = set(counter.reads) & set(refreshable_inputs(definition, workload.inputs, config.inputs, built))
    if moving:
        raise ValueError(f"input counter {spec.counter} reads {sorted(moving)}, which the timer refreshes between calls")
    inputs = make_inputs(definition, workload, seed=input_seed, device="cpu", config=config,
                         dataset_root=Path(dataset_root) if dataset_root else None, only=frozenset(counter.reads))
    got = counter.fn(inputs, definition.resolve_axes(workload.axes), config)
    return input_counts(spec, dict(got))  # the spec's names, each at or above its lower bound (else ValueError)


class TimedCounts:
    """:func:`timed_input_counts` of every workload of a run, computed on a thread of the parent while
    the worker starts (torch's import and the counting overlap with it). ``get`` waits for them, up to
    ``wait_s`` in all; a workload whose counts failed or did not come in time gets None and its reason."""

    def __init__(self, definition: Definition, workloads: list[Workload], *, seed: int, definition_path: Path | None = None,
                 config_overrides: dict[str, Any] | None = None, dataset_root: str | Path | None = None, wait_s: float = 120.0):
        self.results: dict[str, dict[str, float]] = {}
        self.errors: dict[str, str] = {}
        self.wait_s = wait_s
        self._done = threading.Event()

        def work() -> None:
            try:
                for w in workloads:
                    try:
                        c = timed_input_counts(definition, w, seed=seed, definition_path=definition_path,
                                               config_overrides=config_overrides, dataset_root=dataset_root)
                        if c is not None:
                            self.results[w.uuid] = c
                    except Exception as e:  # noqa: BLE001 — the lower bounds stand in, with the reason
                        self.errors[w.uuid] = f"{type(e).__name__}: {str(e)[:300]}"
            finally:
                self._done.set()

        self._thread = threading.Thread(target=work, name="kbot-input-counts", daemon=True)
        self._thread.start()

    @staticmethod
    def wanted(definition: Definition) -> bool:
        """Whether the definition's roofline counts anything from its inputs (else no thread is needed)."""
        return load_spec(definition).counter is not None

    def get(self, uuid: str) -> tuple[dict[str, float] | None, str]:
        """(counts, "") or (None, why not)."""
        if not self._done.wait(self.wait_s):
            self.wait_s = 0.0  # waited once: later workloads do not wait again
            return None, "the timed inputs were not counted in time"
        if uuid in self.results:
            return self.results[uuid], ""
        return None, self.errors.get(uuid, "no counts for this workload")
