"""PyTorch reference of the relation-network readout (model/readout_rn.c; MIXERS.md §5):
a readout variant that replaces ext.head. Per query q = LN_o(Q) row of trajectory b
with state rows w_1..w_T,

    logit = f( (1/T²) Σ_{i,j} g([w_i; w_j; q]) )    over all ordered pairs, i = j too,

g: rn_layers ReLU layers of width rn_width, f: rn_width -> rn_width (ReLU) -> 1.

This reference computes g's first layer NAIVELY, as one [w, 3d] matrix
W₁ = [A | B | C] on the concatenation, while the C engine splits it per token
(A w_i + B w_j + C q + b₁): the golden files therefore also check that the split
equals the naive form, forward and backward. Tensors (C names, model/params.c order):
  ext.rn.g.0.obj.w [2w, d] (A over B), ext.rn.g.0.query.w [w, d] (C), .b [w] (b₁),
  ext.rn.g.{l}.w [w, w] .b [w] for l = 1 .. rn_layers-1, ext.rn.f.0 [w, w], ext.rn.f.1 [1, w].
Run this file to check the naive form against the split form here too.
"""

import sys

import torch
import torch.nn.functional as F

import ws_ref

kind = "readout"


def layout(add, linear, ln, cfg):
    d, w = cfg["d"], cfg["rn_width"]
    add("ext.rn.g.0.obj.w", (2 * w, d), True)
    linear("ext.rn.g.0.query", w, d)
    for l in range(1, cfg["rn_layers"]):
        linear(f"ext.rn.g.{l}", w, w)
    linear("ext.rn.f.0", w, w)
    linear("ext.rn.f.1", 1, w)


def _head(model, h):
    """g's layers 2.., the mean over pairs (dims 1, 2), f."""
    for l in range(1, model.cfg["rn_layers"]):
        h = F.relu(model.lin(h, f"ext.rn.g.{l}"))
    s = h.mean(dim=(1, 2))
    return model.lin(F.relu(model.lin(s, "ext.rn.f.0")), "ext.rn.f.1")[:, 0]


def readout(model, q, w, traj):
    """Logits [N_q] of queries q [N_q, d] on states w [B, T, d]; traj [N_q]."""
    W, d = model.cfg["rn_width"], model.cfg["d"]
    obj = model.p("ext.rn.g.0.obj.w")
    W1 = torch.cat([obj[:W], obj[W:], model.p("ext.rn.g.0.query.w")], dim=1)  # [W, 3d]
    S = w[traj]  # [N, T, d]
    N, T = S.shape[0], S.shape[1]
    x = torch.cat([S[:, :, None, :].expand(N, T, T, d),   # w_i
                   S[:, None, :, :].expand(N, T, T, d),   # w_j
                   q[:, None, None, :].expand(N, T, T, d)], dim=-1)
    return _head(model, F.relu(F.linear(x, W1, model.p("ext.rn.g.0.query.b"))))


def readout_split(model, q, w, traj):
    """The same with the first layer split per token, as the C engine computes it."""
    W = model.cfg["rn_width"]
    obj = model.p("ext.rn.g.0.obj.w")
    S = w[traj]
    a, b = F.linear(S, obj[:W]), F.linear(S, obj[W:])  # [N, T, W] each
    c = model.lin(q, "ext.rn.g.0.query")  # [N, W]
    return _head(model, F.relu(a[:, :, None, :] + b[:, None, :, :] + c[:, None, None, :]))


ws_ref.register_mixer("rn", sys.modules[__name__])


if __name__ == "__main__":
    cfg = {"d": 16, "n_heads": 2, "n_state": 5, "n_upd_layers": 1, "n_ext_layers": 1,
           "max_fact_len": 3, "vocab_cap": 10, "n_overflow": 2, "d_raw": 0, "state_norm": 1,
           "ext_mixer": "rn", "rn_width": 7, "rn_layers": 3}
    g = torch.Generator().manual_seed(0)
    m = ws_ref.WSRef(cfg)
    m.init_random(g)
    q = torch.randn(6, 16, generator=g, dtype=torch.float64)
    w = torch.randn(3, 5, 16, generator=g, dtype=torch.float64)
    traj = torch.tensor([0, 0, 2, 2, 2, 1])
    naive, split = readout(m, q, w, traj), readout_split(m, q, w, traj)
    diff = float((naive - split).abs().max())
    perm = readout(m, q, w[:, torch.tensor([3, 0, 4, 1, 2])], traj)
    pdiff = float((perm - naive).abs().max())
    print(f"split vs naive: max diff {diff:.2e}; permuted state rows: max diff {pdiff:.2e}")
    assert diff < 1e-12 and pdiff < 1e-12
