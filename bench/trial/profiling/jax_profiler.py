"""JAX: the phase breakdown and the profiled pass.

Breakdown.  The training step is one jitted XLA program: nothing inside it can be synchronized
on or timed from Python, and XLA fuses work across what the other frameworks call phases (a
convolution's backward with the next layer's, the optimizer's update with the last
gradients).  So, as in :mod:`.tf_profiler`, separately jitted calls timed with
``block_until_ready`` after each: ``next_batch()`` (``time_data_ms``, measured); ``forward``,
the same model and loss jitted alone (``time_forward_ms``, measured); ``gradients``, the same
plus ``jax.value_and_grad``'s gradients, returned (backward = it less forward: derived); and
the session's own step (optimizer = it less ``gradients``: derived, so it also holds what
the fused step saves or costs against the two calls).  In inference the forward is the
session's own jitted inference step.  The parts add up to the data wait plus the real
step; ``breakdown_sum_pct`` compares that with whole steps timed on their own.  The tag
``bench.breakdown_method`` says which phases are derived.

Profile.  ``jax.profiler.trace`` records the steps into ``jax_profile/`` (``*.xplane.pb``:
TensorBoard's Profile tab, or Perfetto).  The operator table is read from the XSpace
through ``jax.profiler.ProfileData``: each event that names an XLA instruction
(``hlo_op``); on a GPU, kernel time on the device's streams; on the CPU, the time of each
instruction's thunk on XLA's threads.  An instruction is mapped back to what JAX traced
through the compiled program's text (``jit(...).lower(...).compile().as_text()``, compiled
outside the trace): its ``op_name`` (the primitive, under Keras' layer scopes and JAX's
``jvp``/``transpose`` transforms; ``transpose(...)`` is the backward pass) and the Python
function its ``stack_frame_id`` names (``Conv.__call__``, ``BatchNorm.__call__``: Flax has no
layer scopes).  A fusion is named by its own metadata, else its fused computation's root;
instructions without metadata (copies XLA added) by their opcode.  XLA fuses element-wise
work into its neighbours, so a category holds what was fused into its operators.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from bench.core.config import BenchConfig
from bench.trial.frameworks.jax_adapter import JaxSession
from bench.trial.profiling.base import Profile, derived_phases
from bench.trial.profiling.operators import OpTime

TRACE_DIR = "jax_profile"
METHOD_TRAIN = (
    "data and forward measured (next_batch; the model and loss jitted alone); backward "
    "derived (jitted forward+gradients less forward); optimizer derived (the jitted step "
    "less forward+gradients); XLA fuses across these phases inside the step"
)
METHOD_INFER = "data and forward measured (next_batch; the jitted inference step)"


class Profiler:
    def method(self, cfg: BenchConfig) -> str:
        """How the breakdown was measured: which phases are derived (``bench.breakdown_method``)."""
        return METHOD_TRAIN if cfg.mode == "train" else METHOD_INFER

    def splitter(self, session: JaxSession, cfg: BenchConfig) -> Callable[[], dict[str, float]]:
        perf, ready = time.perf_counter, jax.block_until_ready
        calls = _calls(session)
        batch = session.next_batch()  # compile and run each call once, untimed
        for fn in calls.values():
            ready(fn(batch))
        session.sync()

        def split() -> dict[str, float]:
            t0 = perf()
            batch = ready(session.next_batch())
            took = {"data": perf() - t0}
            for name, fn in calls.items():
                t0 = perf()
                ready(fn(batch))
                took[name] = perf() - t0
            return took

        return split

    def phases(self, calls: dict[str, float]) -> dict[str, float]:
        return derived_phases(calls)

    def profile(self, session: JaxSession, cfg: BenchConfig, steps: int, outdir: Path) -> Profile:
        text = _compiled_text(session)
        module = re.match(r"HloModule ([\w.\-]+)", text)
        names = _instructions(text)
        logdir = outdir / TRACE_DIR
        session.sync()
        with jax.profiler.trace(str(logdir)):
            for _ in range(steps):
                session.step(session.next_batch())
            session.sync()
        session.take_mean_loss()
        planes = sorted(
            logdir.glob("plugins/profile/*/*.xplane.pb"), key=lambda p: p.stat().st_mtime
        )
        if not planes:
            raise RuntimeError(f"profile: JAX's profiler wrote no .xplane.pb under {logdir}")
        ops, timeline = read_xspace(planes[-1], names, module.group(1) if module else "")
        return Profile(ops, TRACE_DIR, timeline)


def _calls(session: JaxSession) -> dict[str, Callable[[Any], Any]]:
    """The separately jitted calls, each taking a batch and returning what to wait on."""
    net = session.net

    def step(batch: Any) -> Any:
        session.step(batch)
        return (net.trainable, session._loss_sum, session._out)

    if not session.training:
        return {"forward": step}

    def objective(trainable: Any, non_trainable: Any, x: Any, y: Any) -> Any:
        logits, non_trainable = net.forward(trainable, non_trainable, x, True)
        return net.loss(y, logits), non_trainable

    forward = jax.jit(objective)
    # All the gradients, returned as the real step makes them (nothing pruned; they stay on
    # the device), with the loss and BatchNorm's updated statistics.
    gradients = jax.jit(jax.value_and_grad(objective, has_aux=True))
    return {
        "forward": lambda batch: forward(net.trainable, net.non_trainable, *batch),
        "gradients": lambda batch: gradients(net.trainable, net.non_trainable, *batch),
        "step": step,
    }


def _compiled_text(session: JaxSession) -> str:
    """The session's step function as XLA compiled it (HLO text with each instruction's
    metadata), for a batch of the trial's shapes."""
    net, batch = session.net, session.next_batch()
    if session.training:
        args = (net.trainable, net.non_trainable, session._opt_state, session._loss_sum, *batch)
        lowered = session._train_step.lower(*args)
    else:
        lowered = session._infer.lower(net.trainable, net.non_trainable, batch[0])
    return str(lowered.compile().as_text())


_HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OPCODE = re.compile(r"(?:^|\s)([a-z][a-z0-9_\-]*)\(")
_NUMBERED = re.compile(r"^(\d+) (.*)$")
_SESSION_FRAMES = ("JaxSession.", "_FlaxModel.", "_KerasModel.")
# JAX's transformations in an op_name: jvp(...) is the forward, transpose(...) the backward.
_TRANSFORM = re.compile(r"\b(jit|jvp|transpose|vmap|pjit)\(")


def _instructions(text: str) -> dict[str, tuple[str, str]]:
    """Each instruction of a compiled HLO module's text: (operator, scope).  The operator is
    the JAX primitive its ``op_name`` ends with, else its opcode (a fusion's: its fused
    computation's root's); the scope its ``op_name`` with the Python function its stack
    frame names, marked ``backward/`` where JAX transposed it (the backward pass)."""
    frames = _frame_functions(text)
    own: dict[str, tuple[str, str, str]] = {}  # name -> (opcode, op_name, function)
    roots: dict[str, str] = {}  # computation -> its root instruction
    calls: dict[str, str] = {}  # fusion instruction -> its computation
    computation = ""
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            computation = header.group(1)
            continue
        found = _INSTRUCTION.match(line)
        if not found:
            continue
        is_root, name, rest = found.groups()
        code = _OPCODE.search(rest)
        named = re.search(r'op_name="([^"]*)"', rest)
        frame = re.search(r"stack_frame_id=(\d+)", rest)
        called = re.search(r"calls=%?([\w.\-]+)", rest)
        own[name] = (
            code.group(1) if code else "",
            named.group(1) if named else "",
            frames.get(int(frame.group(1)), "") if frame else "",
        )
        if is_root:
            roots[computation] = name
        if called:
            calls[name] = called.group(1)

    def resolve(name: str, depth: int = 0) -> tuple[str, str, str]:
        opcode, op_name, function = own[name]
        inner = calls.get(name)
        if inner in roots and depth < 8:  # a fusion: its root's opcode, and metadata
            root = resolve(roots[inner], depth + 1)
            opcode = root[0]
            op_name, function = op_name or root[1], function or root[2]
        return opcode, op_name, function

    out: dict[str, tuple[str, str]] = {}
    for name in own:
        opcode, op_name, function = resolve(name)
        primitive = op_name.rsplit("/", 1)[-1] if op_name else ""
        # Layer scopes and function names without JAX's transformations around them
        # (``transpose(jvp(conv2d))`` is conv2d's backward, not a transposition).
        plain = re.sub("/+", "/", _TRANSFORM.sub("", op_name).replace(")", ""))
        scope = "/".join(s for s in (plain, function) if s)
        if "transpose(" in op_name:
            scope = "backward/" + scope
        out[name] = (primitive or opcode or name, scope)
    return out


def _frame_functions(text: str) -> dict[int, str]:
    """Stack frame id -> the Python functions it was traced in, innermost first, up to the
    jax session's own (``Conv/__call__/Block/__call__/...``), from the module text's
    FunctionNames, FileLocations and StackFrames tables.  The text prints each frame's
    parent one above its id (the root's is its own id), hence the ``- 1``."""
    tables: dict[str, dict[int, str]] = {}
    section = ""
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = line
            tables[section] = {}
            continue
        numbered = _NUMBERED.match(line)
        if numbered and section:
            tables[section][int(numbered.group(1))] = numbered.group(2)
        else:
            section = ""
    functions = {k: v.strip('"') for k, v in tables.get("FunctionNames", {}).items()}
    locations = {
        k: functions.get(int(found.group(1)), "")
        for k, v in tables.get("FileLocations", {}).items()
        if (found := re.search(r"function_name_id=(\d+)", v))
    }
    frames: dict[int, tuple[str, int]] = {}
    for k, v in tables.get("StackFrames", {}).items():
        found = re.search(r"file_location_id=(\d+) parent_frame_id=(\d+)", v)
        if found:
            frames[k] = (locations.get(int(found.group(1)), ""), int(found.group(2)) - 1)
    out: dict[int, str] = {}
    for start in frames:
        chain: list[str] = []
        frame = start
        while frame in frames and len(chain) < 32:
            function, parent = frames[frame]
            chain.append(function.replace(".<locals>.", "/").replace(".", "/"))
            if function.startswith(_SESSION_FRAMES) or parent == frame:
                break  # the session's own plumbing, and what called it, say nothing here
            frame = parent
        out[start] = "/".join(chain)
    return out


def read_xspace(
    path: Path, names: dict[str, tuple[str, str]], module: str
) -> tuple[list[OpTime], str]:
    """Operator times of the XLA instructions in a JAX profile (events with an ``hlo_op``
    stat), those of ``module`` named through ``names`` (:func:`_instructions`), any other's
    by its instruction name; ("device" | "host") timeline."""
    data = jax.profiler.ProfileData.from_file(str(path))
    device: list[OpTime] = []
    host: list[OpTime] = []
    for plane in data.planes:
        on_device = plane.name.startswith("/device:GPU:")
        if not on_device and plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            if on_device and not line.name.startswith("Stream"):
                continue  # lines derived from the streams would count their time again
            for event in line.events:
                stats = dict(event.stats)
                instruction = stats.get("hlo_op")
                if not instruction:
                    continue
                name = str(instruction)
                fallback = (re.sub(r"\.\d+$", "", name), "")
                own = stats.get("hlo_module") == module
                operator, scope = names.get(name, fallback) if own else fallback
                op = OpTime(operator, scope, 1, float(event.duration_ns) / 1e3)
                (device if on_device else host).append(op)
    return (device, "device") if device else (host, "host")
