"""bench's decode tokens/s beside Hugging Face's own ``generate()`` on the same model.

    .venv/bin/python scripts/measure/bench_generate.py                  # llama, 4 layers, 256 wide
    .venv/bin/python scripts/measure/bench_generate.py --family gpt2 --batches 1,8 --prompts 32,128

For each batch size x prompt length, one model (``model=hf`` at bench's default size,
random weights, float32, CPU unless --device cuda) generates ``--new-tokens`` tokens per
prompt, greedily with the KV cache:

- bench: mode=generate's own loop (:mod:`bench.trial.generate`): the prefill and each decode
  step timed apart; decode tokens/s = tokens chosen by the decode steps / their time;
- Hugging Face: ``model.generate(do_sample=False, max_new_tokens=N, min_new_tokens=N,
  use_cache=True)``, one call timed whole; its decode time is that call's time less the
  time of the same call with ``max_new_tokens=1`` (the prefill and the first token, with
  generate()'s own set-up), so decode tokens/s = batch x (N - 1) / (t(N) - t(1)).

Each figure is the median of ``--repeats`` timed runs after one warm-up run of each, the
runs of the two sides interleaved (bench: one window per run).  The ratio is bench /
Hugging Face: above 1, bench's loop decodes faster (it skips generate()'s logits processors,
stopping criteria and bookkeeping).  End-to-end
tokens/s (every generated token over prefill and decode) are printed for both as well.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.core.config import BenchConfig, ModelConfig, TelemetryConfig  # noqa: E402
from bench.trial import generate  # noqa: E402
from bench.trial.models import hf_lm  # noqa: E402


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _config(args: argparse.Namespace, batch: int, prompt: int) -> BenchConfig:
    sizes = {k: v for k, v in hf_lm.DEFAULT_SIZES.items() if k != "seq_len"}
    model = ModelConfig(name=args.family, source="hf", **sizes)
    return dataclasses.replace(
        BenchConfig(), model=model, mode="generate", batch_size=batch, prompt_len=prompt,
        new_tokens=args.new_tokens, device=args.device, threads=args.threads,
        telemetry=TelemetryConfig(enabled=False), data=dataclasses.replace(
            BenchConfig().data, num_batches=1),
    )  # fmt: skip


def _hf_seconds(session: Any, new: int) -> float:
    """One ``generate()`` call of ``new`` tokens on the session's model and prompt batch."""
    import torch

    lm, ids = session.model.lm, session._prompt
    session.sync()
    t0 = time.perf_counter()
    with torch.no_grad():
        out = lm.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=new,
            min_new_tokens=new, use_cache=True, pad_token_id=0,
        )  # fmt: skip
    session.sync()
    assert out.shape[1] == ids.shape[1] + new
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", default="llama", choices=sorted(hf_lm.FAMILIES))
    parser.add_argument("--batches", type=_ints, default=[1, 8])
    parser.add_argument("--prompts", type=_ints, default=[32, 128])
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="0: one per usable core")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args(argv)

    import torch

    from bench.core.config import resolved_threads
    from bench.trial.data import synthetic_sequences
    from bench.trial.frameworks.torch_adapter import Adapter

    adapter = Adapter()
    first = _config(args, args.batches[0], args.prompts[0])
    adapter.configure(first, resolved_threads(first))
    n = args.new_tokens
    print(
        f"{args.family} at bench's default size ({hf_lm.DEFAULT_SIZES['layers']} layers, "
        f"{hf_lm.DEFAULT_SIZES['hidden']} wide, vocab {hf_lm.DEFAULT_SIZES['vocab_size']}), "
        f"{n} new tokens, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"median of {args.repeats}"
    )
    header = ("batch", "prompt", "bench decode tok/s", "HF decode tok/s", "ratio",
              "bench e2e tok/s", "HF e2e tok/s", "bench TTFT ms")  # fmt: skip
    print("  ".join(f"{h:>18}" if i > 1 else f"{h:>6}" for i, h in enumerate(header)))
    for batch in args.batches:
        for prompt in args.prompts:
            cfg = _config(args, batch, prompt)
            session = adapter.prepare(cfg, synthetic_sequences(cfg))
            # warm-up of both, then runs interleaved (bench's window, generate(N), generate(1)),
            # so that a change of the machine's load hits both sides alike
            generate.warm_up(session, n, 1)
            _hf_seconds(session, n), _hf_seconds(session, 1)
            windows, full, one = [], [], []
            for _ in range(args.repeats):
                windows += generate.timed_generations(session, 1, batch, prompt, n, False)[1]
                full.append(_hf_seconds(session, n))
                one.append(_hf_seconds(session, 1))
            per = [generate.figures([w], batch, prompt) for w in windows]
            ours = statistics.median(f["decode_tokens_per_s"] for f in per)
            ours_e2e = statistics.median(batch * n / (w.end - w.start) for w in windows)
            ttft = statistics.median(f["time_to_first_token_ms"] for f in per)
            theirs = batch * (n - 1) / (statistics.median(full) - statistics.median(one))
            theirs_e2e = batch * n / statistics.median(full)
            row = (batch, prompt, ours, theirs, ours / theirs, ours_e2e, theirs_e2e, ttft)
            print("  ".join(
                f"{v:>6}" if i < 2 else (f"{v:>18.2f}" if i == 4 else f"{v:>18,.1f}")
                for i, v in enumerate(row)
            ), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
