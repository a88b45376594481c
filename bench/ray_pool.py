"""A sweep over a pool of Ray actors against the same sweep in process.

``python -m bench.ray_pool [--workers 2] [--repeats 3] [--quick]``

Starts a local Ray instance (``num_cpus`` = workers), then for each grid: the sweep in
process (torch's default threads, and one thread, as each worker runs; the pool's values
equal the one-thread ones bit for bit, and differ from a multi-threaded run by float
rounding, as two thread counts differ in process too), then on a :class:`RayPool` of
``--workers`` actors (one CPU, so one torch thread, each), warm (a first sweep of each
is run and not counted), medians of ``--repeats``. Start-up is timed apart: joining Ray,
and the workers starting and loading the model. Also measured, to choose between each
worker running its own baseline and one baseline shipped to all: one baseline forward
against pickling and moving that baseline (its output and the patch sources).

Grids: ``demo:lm`` layers x positions, residual patching, KL; a GPT-2-small-shaped
Hugging Face model (12 layers, 768 wide, 12 heads, random weights, a tokenizer trained
here) layers x 6 positions. The machine's load average is printed with the numbers.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import tempfile
import time
from pathlib import Path

import torch

from hookscope.core import load_model, parse_input
from hookscope.core.analyses.sweep import prepare_sweep, sweep
from hookscope.core.remote import RayPool
from hookscope.core.remote.ray_actor import dumps
from hookscope.core.remote.remote_ray import connect

LM_PROMPT, LM_SOURCE = "text:the cat sat on the ", "text:the dog sat on the "
HF_PROMPT, HF_SOURCE = "text:a cat sat on the mat and the", "text:a dog sat on the log and the"


def gpt2_small_shape(folder: Path, layers: int) -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(["a cat sat on the mat and the dog sat on the log"] * 5,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]", "[PAD]"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=layers, n_embd=768, n_head=12, vocab_size=len(fast), n_positions=64,
                     bos_token_id=0, eos_token_id=0)
    GPT2LMHeadModel(cfg).save_pretrained(folder)
    fast.save_pretrained(folder)
    return f"hf:{folder}"


def median_s(fn, repeats: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_grid(name: str, spec: str, prompt: str, over: dict, intervene: dict, workers: int,
               repeats: int) -> dict:
    lm = load_model(spec)
    x = parse_input(prompt, lm.example_input, lm.meaning.codec)

    def here():
        return sweep(lm.module, x, over, intervene, "kl", meaning=lm.meaning)

    cells = here().cells
    local = median_s(here, repeats)
    values = here().values
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker runs (one CPU reserved: one torch thread)
    try:
        local1 = median_s(here, repeats)
        values1 = here().values
    finally:
        torch.set_num_threads(threads)
    # one baseline forward against shipping it (output and patch sources) to a worker
    ctx = prepare_sweep(lm.module, x, over, intervene, "kl", meaning=lm.meaning)
    assert ctx.shared is not None
    blob = dumps(ctx.shared)
    t0 = time.perf_counter()
    for _ in range(5):
        pickle.loads(dumps(ctx.shared))
    pickle_ms = (time.perf_counter() - t0) / 5 * 1e3
    t0 = time.perf_counter()
    with RayPool("local", spec, workers) as pool:
        startup = time.perf_counter() - t0
        ray = pool._ray
        t0 = time.perf_counter()
        for _ in range(5):
            ray.get(ray.put(blob))
        put_ms = (time.perf_counter() - t0) / 5 * 1e3
        got = pool.sweep(prompt, over, intervene, "kl").values
        equal = bool((got == values1).all())  # bit for bit, at the workers' thread count
        drift = float(abs(got - values).max())  # against torch's default threads here
        remote = median_s(lambda: pool.sweep(prompt, over, intervene, "kl"), repeats)
    return {"grid": name, "cells": cells, "local_s": local, "local_1thread_s": local1,
            "threads": threads, "pool_s": remote, "startup_s": startup, "equal": equal,
            "drift": drift,
            "baseline_ms": ctx.shared.ms, "baseline_bytes": len(blob),
            "ship_ms": pickle_ms + put_ms}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.ray_pool")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="GPT-2 shape with 4 of its 12 layers")
    ns = p.parse_args(argv)
    print(f"load average before: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)", flush=True)
    t0 = time.perf_counter()
    connect("local", num_cpus=ns.workers, include_dashboard=False)
    print(f"joined a new local Ray instance in {time.perf_counter() - t0:.1f} s", flush=True)
    rows = []
    rows.append(bench_grid("demo:lm blocks.* x all positions, patch", "demo:lm", LM_PROMPT,
                           {"layer": "blocks.*", "pos": "all"},
                           {"{layer}": f"patch:{LM_SOURCE}@pos={{pos}}"}, ns.workers, ns.repeats))
    with tempfile.TemporaryDirectory() as d:
        layers = 4 if ns.quick else 12
        spec = gpt2_small_shape(Path(d) / "gpt2", layers)
        rows.append(bench_grid(f"GPT-2 shape ({layers} x 768) h.* x 6 positions, patch", spec,
                               HF_PROMPT, {"layer": "transformer.h.*", "pos": "0:6"},
                               {"{layer}": f"patch:{HF_SOURCE}@pos={{pos}}"}, ns.workers,
                               ns.repeats))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(f"\n| grid | cells | in process ({rows[0]['threads']} threads) | in process (1 thread) "
          f"| pool of {ns.workers} | pool / in process (1 thread) | workers' start-up "
          f"| equal to 1 thread | max diff to {rows[0]['threads']} threads |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['grid']} | {r['cells']} | {r['local_s']:.2f} s | {r['local_1thread_s']:.2f} s "
              f"| {r['pool_s']:.2f} s | {r['pool_s'] / r['local_1thread_s']:.2f} "
              f"| {r['startup_s']:.1f} s | {r['equal']} | {r['drift']:.2g} |")
    print("\nbaseline per worker vs shipped:")
    for r in rows:
        print(f"  {r['grid']}: one baseline forward {r['baseline_ms']:.1f} ms; shipping it "
              f"({r['baseline_bytes'] / 1e6:.2f} MB) {r['ship_ms']:.1f} ms")


if __name__ == "__main__":
    main()
