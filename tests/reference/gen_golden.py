#!/usr/bin/python3
"""Writes the golden files the C model is checked against (tests/test_golden.c).

  tests/golden/model_small.safetensors   state_norm=1
  tests/golden/model_nonorm.safetensors  state_norm=0 (no upd.ln)
  tests/golden/model_comp_self.safetensors   upd_mixer=compositional (S 4, R 3, d_r 5)
  tests/golden/model_comp_cross.safetensors  ext_mixer=compositional (S 2, R 3, d_r 3)
  tests/golden/model_hashed.safetensors  symbol_code=hashed: symbols with ids and hashes,
                                         and symbols known by their hash alone
  tests/golden/model_views.safetensors   the same in 2 views (in.w_prev and out.w_t
                                         [B, 2T, d]; out.logits the views' mean)

Each holds, for one small config and one ragged batch of 3 trajectories:
  param.<name>   initial parameters (C names and shapes, model/params.c)
  in.*           the batch (layout in ws_ref.py) and in.w_prev [B,T,d]; hashed files
                 also in.instr_hash / in.query_hash [N,S,2] int32 (low, high halves)
  out.w_t, out.logits, out.loss      after one forward pass
  grad.<name>    gradients of out.loss (before clipping)
  adam3.<name>   parameters after 3 x {zero_grad; forward/backward on the same batch
                 from the same W_prev; clip_grad_norm_; AdamW step}
  __metadata__   config (JSON), optim (JSON), steps ("3"), grad_norms (JSON, the
                 global norm before clipping at each of the 3 steps)
Everything is computed in float64 from float32-representable parameters and
inputs, then stored as float32. Deterministic (fixed seeds).

Usage: /usr/bin/python3 tests/reference/gen_golden.py [--out DIR] [--check] [--only FILE]
(--check: regenerate in memory and compare against the files in DIR instead.)
"""

import argparse
import copy
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mix_rn  # noqa: E402,F401  (registers the rn readout)
import st  # noqa: E402
import symcode  # noqa: E402
import ws_ref  # noqa: E402
import mix_simplicial2  # noqa: E402,F401  (registers the mixer)
import mix_rmc  # noqa: E402,F401  (registers "rmc")
import mix_compositional  # noqa: E402,F401  (registers the mixer)

BASE_CFG = {"d": 16, "n_heads": 2, "n_state": 4, "n_upd_layers": 2, "n_ext_layers": 2,
            "max_fact_len": 3, "vocab_cap": 20, "n_overflow": 4, "d_raw": 5, "state_norm": 1}
OPTIM = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.1,
         "clip_norm": 1.0}
STEPS = 3

# One golden file per entry: (file name, config overrides of BASE_CFG). A mixer adds
# its entries here (and imports its tests/reference/mix_<name>.py, which registers it
# in ws_ref.MIXERS); tests/test_golden.c checks every tests/golden/model_*.safetensors.
GOLDEN = [
    ("model_small.safetensors", {"state_norm": 1}),
    ("model_nonorm.safetensors", {"state_norm": 0}),
    # the rn readout after 2 Extractor layers, and alone on LN_o(facts) with a middle g layer
    ("model_rn.safetensors", {"ext_mixer": "rn", "rn_width": 16, "rn_layers": 2}),
    ("model_rn_noext.safetensors", {"ext_mixer": "rn", "n_ext_layers": 0, "rn_width": 24,
                                    "rn_layers": 3}),
    ("model_s2_self.safetensors", {"upd_mixer": "simplicial2", "s2_virtual": 2, "s2_heads": 2,
                                   "s2_dim": 6, "s2_tau": 0.25}),
    ("model_s2_cross.safetensors", {"ext_mixer": "simplicial2", "s2_heads": 1, "s2_dim": 5,
                                    "s2_tau": 0.5}),
    ("model_rmc.safetensors", {"upd_mixer": "rmc"}),
    ("model_rmc_nonorm.safetensors", {"upd_mixer": "rmc", "state_norm": 0}),
    ("model_comp_self.safetensors", {"upd_mixer": "compositional", "comp_searches": 4,
                                     "comp_retrievals": 3, "comp_dim": 5}),
    ("model_comp_cross.safetensors", {"ext_mixer": "compositional", "comp_searches": 2,
                                      "comp_retrievals": 3, "comp_dim": 3}),
    # the open-vocabulary encoding: fixed codes of the symbols' hashes + E_sym corrections
    ("model_hashed.safetensors", {"symbol_code": "hashed"}),
    # empty_steps "hold": trajectory 1 (a state, no instructions) keeps its state
    ("model_hold.safetensors", {"empty_steps": "hold"}),
    # two views (model/views.c): the facts again on codes of mixed hashes, the mean logit
    ("model_views.safetensors", {"symbol_code": "hashed", "views": 2}),
]


def f32(x):
    """Rounds to float32 and back to float64 (the file stores float32)."""
    return torch.as_tensor(np.asarray(x, dtype=np.float32), dtype=torch.float64)


def build_batch(cfg, seed):
    rng = np.random.default_rng(seed)
    d_raw, B, T, d = cfg["d_raw"], 3, cfg["n_state"] * cfg.get("views", 1), cfg["d"]

    def raw():
        return ("raw", [float(v) for v in rng.standard_normal(d_raw).astype(np.float32)])

    # ids >= vocab_cap (20) are overflow buckets [20, 24); lengths 1..3; some ids
    # repeat within a fact and across trajectories (gradient accumulation).
    trajs = [
        {"from_w0": True,
         "instr": [([3, 21, 7], 1), (raw(), 0), ([5], 1)],
         "query": [([3, 21], 1), ([9, 9, 23], -1), ([5], 0), (raw(), 1)]},
        {"from_w0": False, "instr": [],
         "query": [([20, 7], 0), ([11, 2, 22], 1)]},
        {"from_w0": False,
         "instr": [([1], 0), ([22, 4], 1), ([7, 7], 0), ([19, 0, 23], 1), ([13, 6], 1)],
         "query": []},
    ]
    if cfg.get("symbol_code") == "hashed":
        # named ids carry the hash of a name; the overflow ids become symbols known
        # by their hash alone (id -1): a symbol no vocabulary has
        def sym(x):
            return (x, symcode.sym_hash("s%d" % x)) if x < cfg["vocab_cap"] else \
                (-1, symcode.sym_hash("fresh%d" % x))
        for t in trajs:
            for kind in ("instr", "query"):
                t[kind] = [(f if isinstance(f, tuple) else [sym(x) for x in f], v)
                           for f, v in t[kind]]
    w_prev = rng.standard_normal((B, T, d)).astype(np.float32)
    return ws_ref.make_batch(cfg, trajs, f32(w_prev))


def train_steps(model, batch, steps):
    """AdamW as the C trainer does it; returns the global grad norms before clipping."""
    opt = torch.optim.AdamW(model.param_groups(OPTIM["weight_decay"]), lr=OPTIM["lr"],
                            betas=(OPTIM["beta1"], OPTIM["beta2"]), eps=OPTIM["eps"])
    params = [p for _, p in model.named_c_parameters()]
    norms = []
    for _ in range(steps):
        opt.zero_grad()
        _, _, loss = model(batch)
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, OPTIM["clip_norm"])))
        opt.step()
    return norms


def generate(cfg, seed=1234):
    torch.manual_seed(seed)
    model = ws_ref.WSRef(cfg, dtype=torch.float64)
    model.init_random(torch.Generator().manual_seed(seed))
    with torch.no_grad():  # the file stores float32: compute from exactly those values
        for _, p in model.named_c_parameters():
            p.copy_(f32(p.detach().numpy()))
    batch = build_batch(cfg, seed + 1)
    ws_ref.self_check(model, batch)

    init = {n: p.detach().clone() for n, p in model.named_c_parameters()}
    w_t, logits, loss = model(batch)
    loss.backward()
    grads = {}
    for n, p in model.named_c_parameters():
        if p.grad is None:
            raise RuntimeError(f"{n} gets no gradient: the batch does not exercise it")
        grads[n] = p.grad.detach().clone()

    trained = copy.deepcopy(model)
    for p in trained.parameters():
        p.grad = None
    norms = train_steps(trained, batch, STEPS)
    # The first step must clip (the clipped path is exercised); later steps may not.
    if not norms[0] > 1.5 * OPTIM["clip_norm"]:
        raise RuntimeError(f"clipping does not trigger at step 1: norms {norms}")

    out = {}
    for n, v in init.items():
        out["param." + n] = v.numpy().astype(np.float32)
    for k in ("from_w0", "n_instr", "n_query", "instr_ids", "instr_raw_row", "instr_raw",
              "instr_val", "query_ids", "query_raw_row", "query_raw", "query_label", "w_prev"):
        v = batch[k].numpy()
        out["in." + k] = v.astype(np.float32 if v.dtype.kind == "f" else np.int32)
    if cfg.get("symbol_code") == "hashed":
        for k in ("instr_hash", "query_hash"):
            out["in." + k] = symcode.to_halves(batch[k])
    out["out.w_t"] = w_t.detach().numpy().astype(np.float32)
    out["out.logits"] = logits.detach().numpy().astype(np.float32)
    out["out.loss"] = np.array([float(loss)], dtype=np.float32)
    for n, g in grads.items():
        out["grad." + n] = g.numpy().astype(np.float32)
    for n, p in trained.named_c_parameters():
        out["adam3." + n] = p.detach().numpy().astype(np.float32)
    meta = {
        # the mixer fields an entry sets (absent ones are the defaults)
        "config": json.dumps({k: cfg[k] for k in ws_ref.CONFIG_KEYS + tuple(ws_ref.OPTIONAL_FIELDS)
                              if k in cfg}),
        "optim": json.dumps(OPTIM),
        "steps": str(STEPS),
        "grad_norms": "[" + ", ".join("%.9g" % n for n in norms) + "]",
        "generator": "tests/reference/gen_golden.py (PyTorch %s, float64)" % torch.__version__,
    }
    info = {"loss": float(loss), "logits": [round(float(x), 4) for x in logits],
            "grad_norms": norms}
    return out, meta, info, (model, batch, init)


def float32_spread(cfg, init, batch):
    """How far the same computation in float32 lands from the float64 golden: a
    floor for what the C test (float32) can reach, per tensor group."""
    m64 = ws_ref.WSRef(cfg, dtype=torch.float64)
    m32 = ws_ref.WSRef(cfg, dtype=torch.float32)
    m64.load_c({n: v for n, v in init.items()})
    m32.load_c({n: v.float() for n, v in init.items()})
    b32 = {k: (v.float() if v.dtype == torch.float64 else v) for k, v in batch.items()}
    res = {}
    for kind in ("grad", "adam3"):
        for mdl, b in ((m64, batch), (m32, b32)):
            for p in mdl.parameters():
                p.grad = None
            if kind == "grad":
                mdl(b)[2].backward()
            else:
                train_steps(mdl, b, STEPS)
        for (n, p64), (_, p32) in zip(m64.named_c_parameters(), m32.named_c_parameters()):
            a = p64.grad if kind == "grad" else p64.detach()
            c = p32.grad if kind == "grad" else p32.detach()
            den = float(a.norm())
            if den > 0:
                res[f"{kind}.{n}"] = float((c.double() - a).norm()) / den
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.normpath(os.path.join(here, "..", "golden")))
    ap.add_argument("--check", action="store_true",
                    help="compare a fresh generation with the files in --out")
    ap.add_argument("--only", metavar="FILE", help="just this golden file (e.g. "
                    "model_hashed.safetensors)")
    ap.add_argument("--spread", action="store_true",
                    help="also report the float32-vs-float64 spread of the same computation")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    status = 0
    for fname, overrides in GOLDEN:
        if args.only and fname != args.only:
            continue
        cfg = dict(BASE_CFG, **overrides)
        tensors, meta, info, (model, batch, init) = generate(cfg)
        path = os.path.join(args.out, fname)
        if args.check:
            old, old_meta = st.load(path)
            same = list(old) == list(tensors) and all(
                np.array_equal(old[k], tensors[k]) for k in tensors) and old_meta == meta
            print(f"{path}: {'identical' if same else 'DIFFERS'}")
            status |= 0 if same else 1
        else:
            st.save(path, tensors, meta)
            print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(tensors)} tensors)")
        print(f"  loss {info['loss']:.6f}  logits {info['logits']}")
        print(f"  grad norms before clipping (clip_norm {OPTIM['clip_norm']}): "
              + ", ".join(f"{n:.4f}" for n in info["grad_norms"]))
        if args.spread:
            spread = float32_spread(cfg, init, batch)
            for kind in ("grad", "adam3"):
                worst = max((k for k in spread if k.startswith(kind)), key=spread.get)
                print(f"  float32 vs float64: worst {kind} tensor {worst} rel err {spread[worst]:.2e}")
    return status


if __name__ == "__main__":
    sys.exit(main())
