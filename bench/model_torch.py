#!/usr/bin/python3
"""PyTorch speed peer of bench_model.c: the same Updater-Extractor model
(tests/reference/ws_ref.py, float32, CPU) on the same workload.

Config (issue #2): d=128, heads=4, T=32, 2 updater + 2 extractor layers, S=4,
vocab 1000 (+64 overflow buckets), batch 64 trajectories, 16 instructions and 64
queries per trajectory per step, facts of 1..4 random symbols. Measures, at
torch.set_num_threads(1) and (2):
  train steps/s        forward + backward + clip_grad_norm_ + AdamW per step
  updater steps/s      no-grad updater pass (instructions embedded, no queries)
  extractor queries/s  no-grad extractor pass (queries embedded) x 64·64 queries
Threads: torch.set_num_threads(n) and the same n for the system OpenBLAS that
Debian's torch multiplies with (its pool is separate from torch's), and
OMP_WAIT_POLICY=PASSIVE unless set (spinning waiters hurt on 2 shared cores).
Batches are dense padded tensors (every trajectory has the same counts, so the
ragged layout reduces to reshapes); no Python loop over trajectories.
The new state feeds the next step, as the C benchmark updates its states in place.

Prints a table and one JSON line (the best thread count by train steps/s):
{"bench":"model_torch","torch_threads":..,"train_steps_per_s":..,
 "updater_steps_per_s":..,"extractor_queries_per_s":..,...}
Usage: /usr/bin/python3 bench/model_torch.py [--seconds S] [--json-only]

With --step-batches 1,8,64,256 it measures instead the serving step of issue 15
(bench_threads.c's) on the shipped default model's config: per trajectory 4
instructions + 8 queries of 2-3 symbols, updater then extractor, no grad, at 1
and 2 threads; one JSON line
{"bench":"model_torch_step","steps_per_s":{"1":..,..},"threads":{"1":..,..}}
with each batch's best thread count.
"""

import argparse
import ctypes
import json
import os
import sys
import time

# Threads wait passively between parallel regions (unless the caller chose): with
# 2 threads on a 2-core machine, libgomp's spinning waiters steal the core the
# other thread needs, and torch at 2 threads ran 2-4x slower than at 1 (measured).
# Must be set before torch loads libgomp.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
import ws_ref  # noqa: E402

CFG = {"d": 128, "n_heads": 4, "n_state": 32, "n_upd_layers": 2, "n_ext_layers": 2,
       "max_fact_len": 4, "vocab_cap": 1000, "n_overflow": 64, "d_raw": 0, "state_norm": 1}
BATCH, N_INSTR, N_QUERY = 64, 16, 64
# ws_optim_config_default() of the C model
OPTIM = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01, "clip": 1.0}


def _openblas():
    """Debian's torch does its matrix products in the system OpenBLAS (pthread
    build), whose thread pool torch.set_num_threads() does not control: without
    this, a "1-thread" run would still multiply on every core."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line and ".so" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_set_num_threads.argtypes = [ctypes.c_int]
            lib.openblas_get_num_threads.restype = ctypes.c_int
            return lib
        except (OSError, AttributeError):
            continue
    return None


OPENBLAS = _openblas()


def set_threads(n):
    """n threads for torch's own kernels and for BLAS; returns the BLAS count."""
    torch.set_num_threads(n)
    if OPENBLAS is None:
        return None
    OPENBLAS.openblas_set_num_threads(n)
    return OPENBLAS.openblas_get_num_threads()


def random_facts(gen, n, lens=None):
    """n facts of lens = (lo, hi) random symbols (default 1..S): ids [n, S] padded with -1."""
    S = CFG["max_fact_len"]
    lo, hi = lens or (1, S)
    ids = torch.randint(0, CFG["vocab_cap"], (n, S), generator=gen, dtype=torch.int32)
    length = torch.randint(lo, hi + 1, (n, 1), generator=gen)
    return torch.where(torch.arange(S)[None, :] < length, ids, torch.full_like(ids, -1))


def make_batch(gen, n_instr, n_query, batch=BATCH, lens=None):
    ni, nq = batch * n_instr, batch * n_query
    return {
        "from_w0": torch.zeros(batch, dtype=torch.int32),
        "n_instr": torch.full((batch,), n_instr, dtype=torch.int32),
        "n_query": torch.full((batch,), n_query, dtype=torch.int32),
        "instr_ids": random_facts(gen, ni, lens),
        "instr_raw_row": torch.full((ni,), -1, dtype=torch.int32),
        "instr_raw": None,
        "instr_val": torch.randint(0, 2, (ni,), generator=gen, dtype=torch.int32),
        "query_ids": random_facts(gen, nq, lens),
        "query_raw_row": torch.full((nq,), -1, dtype=torch.int32),
        "query_raw": None,
        "query_label": torch.randint(0, 2, (nq,), generator=gen, dtype=torch.int32),
    }


def build_model(gen):
    model = ws_ref.WSRef(CFG, dtype=torch.float32)
    with torch.no_grad():  # GPT-2 style, as ws_model_new: N(0, 0.02), zero biases, unit gains
        for name, p in model.named_c_parameters():
            is_ln = ".ln" in name or name.startswith(("ext.ln", "upd.ln"))
            if is_ln:
                p.fill_(1.0 if name.endswith(".g") else 0.0)
            elif name.endswith(".b"):
                p.zero_()
            else:
                p.normal_(0.0, 0.02, generator=gen)
    return model


def time_loop(fn, seconds):
    fn()  # warm-up (allocator, caches)
    iters, t0 = 0, time.perf_counter()
    while True:
        fn()
        iters += 1
        t = time.perf_counter()
        if t - t0 >= seconds and iters >= 3:
            return iters / (t - t0)


def measure(threads, seconds):
    blas_threads = set_threads(threads)
    gen = torch.Generator().manual_seed(1)
    model = build_model(gen)
    train = make_batch(gen, N_INSTR, N_QUERY)
    upd = make_batch(gen, N_INSTR, 0)
    with torch.no_grad():
        w0 = model.p("state.w0").detach().clone()
    state = {"w": w0[None].expand(BATCH, -1, -1).contiguous()}
    params = [p for _, p in model.named_c_parameters()]
    opt = torch.optim.AdamW(model.param_groups(OPTIM["weight_decay"]), lr=OPTIM["lr"],
                            betas=OPTIM["betas"], eps=OPTIM["eps"])

    def train_step():
        train["w_prev"] = state["w"]
        opt.zero_grad(set_to_none=True)
        w_t, _, loss = model(train)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, OPTIM["clip"])
        opt.step()
        state["w"] = w_t.detach()

    def updater_step():
        upd["w_prev"] = state["w"]
        with torch.inference_mode():
            state["w"] = model.updater(upd)

    def extractor_pass():
        with torch.inference_mode():
            torch.sigmoid(model.extractor(train, state["w"]))

    return {
        "blas_threads": blas_threads,
        "train_steps_per_s": time_loop(train_step, seconds),
        "updater_steps_per_s": time_loop(updater_step, seconds),
        "extractor_queries_per_s": time_loop(extractor_pass, seconds) * BATCH * N_QUERY,
    }


def measure_step(batch, threads, seconds, views=1):
    """Serving steps/s (updater + extractor, no grad) of `batch` trajectories, each
    in `views` views as the C model runs them (model/views.c: a view is one more
    trajectory, on other codes; the answer the mean of the views' logits)."""
    set_threads(threads)
    gen = torch.Generator().manual_seed(1)
    model = build_model(gen)
    rows = batch * views
    b = make_batch(gen, 4, 8, rows, (2, 3))
    with torch.no_grad():
        w0 = model.p("state.w0").detach().clone()
    state = {"w": w0[None].expand(rows, -1, -1).contiguous()}

    def step():
        b["w_prev"] = state["w"]
        with torch.inference_mode():
            state["w"] = model.updater(b)
            logits = model.extractor(b, state["w"]).view(batch, views, 8)
            torch.sigmoid(logits.mean(dim=1))

    return time_loop(step, seconds) * batch


def shipped_config():
    """CFG's fields as the shipped default model has them (models/default.safetensors),
    and its views."""
    path = os.path.join(HERE, "..", "models", "default.safetensors")
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        cfg = json.loads(json.loads(f.read(n))["__metadata__"]["config"])
    return {k: cfg[k] for k in CFG if k in cfg}, cfg.get("views", 1)


def main_steps(batches, seconds, d=0):
    views = 1
    try:  # the model the C side measures (bench_threads loads the shipped one)
        fields, views = shipped_config()
        CFG.update(fields)
    except (OSError, KeyError, ValueError):
        pass
    if d:  # bench_threads --d: the same shape at another width
        CFG["d"] = d
    rates, threads = {}, {}
    for n in batches:
        by_threads = {t: measure_step(n, t, seconds, views) for t in (1, 2)}
        threads[str(n)] = max(by_threads, key=by_threads.get)
        rates[str(n)] = round(by_threads[threads[str(n)]], 1)
    print(json.dumps({"bench": "model_torch_step", "torch_version": torch.__version__, "d": CFG["d"],
                      "views": views,
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                      "steps_per_s": rates, "threads": threads}))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description="PyTorch peer of bench_model (CPU, float32)")
    ap.add_argument("--seconds", type=float, default=5.0, help="per measurement (default 5)")
    ap.add_argument("--json-only", action="store_true", help="print only the JSON line")
    ap.add_argument("--step-batches", help="serving steps at these batch sizes (e.g. 1,8,64,256)")
    ap.add_argument("--d", type=int, default=0,
                    help="with --step-batches: the shipped shape at this width (default: its own)")
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.step_batches:
        return main_steps([int(x) for x in args.step_batches.split(",")], args.seconds, args.d)
    results = {t: measure(t, args.seconds) for t in (1, 2)}
    best = max(results, key=lambda t: results[t]["train_steps_per_s"])
    if not args.json_only:
        print(f"PyTorch {torch.__version__} CPU float32, d={CFG['d']} heads={CFG['n_heads']} "
              f"T={CFG['n_state']} layers {CFG['n_upd_layers']}+{CFG['n_ext_layers']}, batch "
              f"{BATCH} x ({N_INSTR} instr, {N_QUERY} queries)")
        print("  threads  BLAS threads  train steps/s  updater steps/s  extractor queries/s")
        for t, r in results.items():
            blas = "?" if r["blas_threads"] is None else r["blas_threads"]
            print(f"  {t:<7}  {blas:<12}  {r['train_steps_per_s']:13.2f}"
                  f"  {r['updater_steps_per_s']:15.2f}  {r['extractor_queries_per_s']:19.0f}")
    out = {"bench": "model_torch", "torch_version": torch.__version__, "torch_threads": best}
    out.update({k: round(v, 3) for k, v in results[best].items() if k != "blas_threads"})
    out["blas"] = "openblas (threads set with torch's)" if OPENBLAS else "unknown (not set)"
    out["omp_wait_policy"] = os.environ.get("OMP_WAIT_POLICY", "")
    for t, r in results.items():
        out[f"threads_{t}"] = {"train": round(r["train_steps_per_s"], 3),
                               "updater": round(r["updater_steps_per_s"], 3),
                               "extractor_qps": round(r["extractor_queries_per_s"], 1)}
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
