#!/usr/bin/python3
"""Throughput of offline retraining with PyTorch DDP (scripts/retrain_ddp.py) at
1 and 2 ranks on this machine (gloo, CPU, one torch thread per rank), on the same
global batch: 1 rank of batch 2B against 2 ranks of batch B.

The corpus is synthetic, in `worldstate-train export`'s format: --sessions
households of --steps labelled steps (tests/python/test_retrain_ddp.py's
generator: fresh names per session, 1-2 instructions and 4 labelled queries a
step); the model is the shipped default (models/default.safetensors). An
example is one trajectory step (its instructions, labelled and recall queries).

Prints a table and one JSON line:
{"bench":"retrain_ddp","runs":[{"ranks","batch_per_rank","examples_per_s",...}],
 "speedup_2_over_1":..}
Usage: /usr/bin/python3 bench/retrain_ddp.py [--sessions N] [--steps N] [--batch B]
       [--epochs N] [--repeat N]
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from test_retrain_ddp import session_steps  # noqa: E402


def write_corpus(path, n_sessions, n_steps, seed):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for k in range(n_sessions):
            for n, s in enumerate(session_steps(rng, k, n_steps), 1):
                s.update(session=f"bench{k:06d}", model="default", step=n)
                f.write(json.dumps(s) + "\n")


def run(corpus, out, ranks, batch, epochs):
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "retrain_ddp.py"), "--nproc", str(ranks),
           "--batch", str(batch), "--epochs", str(epochs), "--warmup", "10",
           "--checkpoint", os.path.join(ROOT, "models", "default.safetensors"),
           "--jsonl", corpus, "--out", out]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=96)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=16, help="B: batch per rank at 2 ranks")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--repeat", type=int, default=1, help="runs of each (the best is kept)")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="ws-ddp-bench-") as tmp:
        corpus = os.path.join(tmp, "steps.jsonl")
        write_corpus(corpus, a.sessions, a.steps, 1)
        runs = []
        for ranks, batch in ((1, 2 * a.batch), (2, a.batch)):
            best = max((run(corpus, os.path.join(tmp, "out.safetensors"), ranks, batch, a.epochs)
                        for _ in range(a.repeat)), key=lambda r: r["examples_per_s"])
            runs.append({k: best[k] for k in ("ranks", "batch_per_rank", "examples", "seconds",
                                              "examples_per_s", "cpu_seconds",
                                              "examples_per_cpu_s", "loss")})
    print(f"{'ranks':>5} {'batch/rank':>10} {'examples':>8} {'seconds':>8} {'examples/s':>10} "
          f"{'CPU s':>7} {'examples/CPU s':>14}")
    for r in runs:
        print(f"{r['ranks']:>5} {r['batch_per_rank']:>10} {r['examples']:>8} {r['seconds']:>8.1f} "
              f"{r['examples_per_s']:>10.1f} {r['cpu_seconds']:>7.1f} {r['examples_per_cpu_s']:>14.1f}")
    print(json.dumps({"bench": "retrain_ddp", "sessions": a.sessions, "steps": a.steps,
                      "cpus": os.cpu_count(), "runs": runs,
                      "speedup_2_over_1": round(runs[1]["examples_per_s"]
                                                / runs[0]["examples_per_s"], 3)}))


if __name__ == "__main__":
    main()
