"""Compositional attention (Mittal et al., ICLR 2022; shared/MIXERS.md §3) for the
PyTorch reference, as model/mixer_compositional.c lays it out (the authors'
Sort-of-CLEVR code): S = comp_searches searches of width d/S, R = comp_retrievals
retrievals of width d_v = d/S, retrieval queries d -> S*d_r and one retrieval-key
Linear(d_v -> d_r) shared by every search and retrieval, d_r = comp_dim.

  alpha_s = softmax_keys(Q_s K_s^T / sqrt(d/S))     O[s, r] = alpha_s V_r
  e[n, s, r] = qbar[n, s] . (O[s, r][n] Wk^T + bk) / sqrt(d_r)
  y[n, s] = sum_r softmax_r(e)[n, s, r] O[s, r][n]   out = concat_s(y) Wo^T + bo

Tensors: self "<p>.qkv" [2d + R*d_v, d] (rows Q, K, V); cross "<p>.q" [d, d] and
"<p>.kv" [d + R*d_v, d] (rows K, V); "<p>.rq" [S*d_r, d], "<p>.rk" [d_r, d_v],
"<p>.out" [d, d]. The retrieval query reads the query side x in both modes.
"""

import math
import sys

import torch

import ws_ref


def layout(add, linear, ln, prefix, cfg, mode):
    d, S, R, dr = cfg["d"], cfg["comp_searches"], cfg["comp_retrievals"], cfg["comp_dim"]
    dv = d // S
    if mode == "self":
        linear(prefix + ".qkv", 2 * d + R * dv, d)
    else:
        linear(prefix + ".q", d, d)
        linear(prefix + ".kv", d + R * dv, d)
    linear(prefix + ".rq", S * dr, d)
    linear(prefix + ".rk", dr, dv)
    linear(prefix + ".out", d, d)


def forward(model, x, keys, key_mask, prefix, mode):
    """x [B, Lq, d] LayerNorm'd queries, keys [B, Lk, d], key_mask [B, Lk] or None."""
    c = model.cfg
    d, S, R, dr = c["d"], c["comp_searches"], c["comp_retrievals"], c["comp_dim"]
    dk = dv = d // S
    if mode == "self":
        qkv = model.lin(x, prefix + ".qkv")
        q, k, v = qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]
    else:
        q = model.lin(x, prefix + ".q")
        kv = model.lin(keys, prefix + ".kv")
        k, v = kv[..., :d], kv[..., d:]
    B, Lq, Lk = x.shape[0], x.shape[1], k.shape[1]
    q = q.reshape(B, Lq, S, dk).transpose(1, 2)                  # [B, S, Lq, dk]
    k = k.reshape(B, Lk, S, dk).transpose(1, 2)                  # [B, S, Lk, dk]
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dk)  # [B, S, Lq, Lk]
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask[:, None, None, :], float("-inf"))
    alpha = torch.softmax(scores, dim=-1)
    # every search retrieves with every value head: O [B, Lq, S, R, dv]
    o = torch.einsum("bsqk,bkc->bqsc", alpha, v).reshape(B, Lq, S, R, dv)
    qbar = model.lin(x, prefix + ".rq").reshape(B, Lq, S, 1, dr)
    kbar = model.lin(o, prefix + ".rk")                          # one W_k for all (s, r)
    rho = torch.softmax((qbar * kbar).sum(-1) / math.sqrt(dr), dim=-1)  # [B, Lq, S, R]
    y = (rho.unsqueeze(-1) * o).sum(-2).reshape(B, Lq, S * dv)
    return model.lin(y, prefix + ".out")


ws_ref.register_mixer("compositional", sys.modules[__name__])
