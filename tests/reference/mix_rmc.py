"""PyTorch reference of the relational-memory-core Updater (upd_mixer = "rmc";
model/updater_rmc.c, ../../shared/MIXERS.md §4 and §9).

    X = M_prev + P
    per block l:  h = LN1(X);  X += MHA(q = h, keys/values = [h; C])   (upd.{l}.cross)
                  X += MLP(LN2(X))
    M~ = LN_c(X)                                   (upd.ln_cand)
    x_bar = mean of the trajectory's context rows C = [c_null; instructions]
    G = tanh(M_prev) W_gm^T + b_gm + (x_bar W_gx^T + b_gx), broadcast over the T rows
    i = sigmoid(G_i + 0), f = sigmoid(G_f + 1)
    M_t = i * tanh(M~) + f * M_prev
    W_t = LN_w(M_t) if state_norm else M_t

Pre-LN blocks, state rows as the only queries, the mean of the context as the
gate input, LN_c on the candidate and LN_w on the new state: see the C file's
header for why. Registered as an Updater variant (kind "updater") in ws_ref.MIXERS.
"""

import sys

import torch

import ws_ref

kind = "updater"

INPUT_BIAS = 0.0
FORGET_BIAS = 1.0


def layout(add, linear, ln, cfg):
    d = cfg["d"]
    for l in range(cfg["n_upd_layers"]):
        p = f"upd.{l}"
        ln(p + ".ln1")
        linear(p + ".cross.q", d, d)
        linear(p + ".cross.kv", 2 * d, d)
        linear(p + ".cross.out", d, d)
        ln(p + ".ln2")
        linear(p + ".mlp.fc", 4 * d, d)
        linear(p + ".mlp.proj", d, 4 * d)
    ln("upd.ln_cand")
    linear("upd.gate.m", 2 * d, d)  # rows: input gate, then forget gate
    linear("upd.gate.x", 2 * d, d)
    if cfg["state_norm"]:
        ln("upd.ln")


def updater(model, X, C, cmask, M_prev):
    c = model.cfg
    B, T, d = X.shape
    # memory rows [LN1(X); C]: the state rows are always valid keys
    kmask = None if cmask is None else torch.cat([cmask.new_ones(B, T), cmask], 1)
    for l in range(c["n_upd_layers"]):
        p = f"upd.{l}"
        h = model.ln(X, p + ".ln1")
        keys = torch.cat([h, C], 1)
        X = X + model.mix("mha", h, keys, kmask, p + ".cross", "cross")
        X = model.mlp_block(X, p, "ln2")
    cand = model.ln(X, "upd.ln_cand")
    if cmask is None:
        x_bar = C.mean(1)
    else:
        w = cmask.to(C.dtype)[..., None]
        x_bar = (C * w).sum(1) / w.sum(1)
    G = model.lin(torch.tanh(M_prev), "upd.gate.m") + model.lin(x_bar, "upd.gate.x")[:, None, :]
    i = torch.sigmoid(G[..., :d] + INPUT_BIAS)
    f = torch.sigmoid(G[..., d:] + FORGET_BIAS)
    M = i * torch.tanh(cand) + f * M_prev
    return model.ln(M, "upd.ln") if c["state_norm"] else M


ws_ref.register_mixer("rmc", sys.modules[__name__])
