"""PyTorch reference of the simplicial2 mixer (model/mixer_simplicial2.c,
shared/MIXERS.md §2): 2-simplicial attention with virtual entities.

Written independently of the C code's factorisations: the triple product is formed
from the explicit w_ijk = (p·l1) l2 − (p·l2) l1 + (l1·l2) p for every triple, the
pair values T_jk = B_h(u_j ⊗ u_k) from the full outer product, and autograd gives
every gradient. The branch is Y = [a1, LN(a2)] W_O + b_O with W_O = [out.w | s2.out.w].
SELF mode: the last s2_virtual of the T rows are virtual entities (standard rows see
standard keys 1-simplicially and virtual pairs 2-simplicially; virtual rows see all
keys and output their own value u as a2). CROSS mode: plain cross MHA plus
2-simplicial attention over all T² pairs of key rows.
"""

import math
import sys

import torch
import torch.nn.functional as F

import ws_ref

EPS = 1e-6  # WS_S2_EPS (kernels/mixer_ops_simplicial2.h)


def layout(add, linear, ln, prefix, cfg, mode):
    d, d2, k2 = cfg["d"], cfg["s2_dim"], cfg["s2_heads"]
    ws_ref.mha_layout(linear, prefix, d, mode)
    if k2 == 0:
        return
    dl = d2 // k2
    add(prefix + ".s2.p.w", (d2, d), True)
    add(prefix + ".s2.luv.w", (3 * d2, d), True)
    add(prefix + ".s2.B", (d2, dl * dl), True)
    add(prefix + ".s2.ln.g", (d2,))
    add(prefix + ".s2.ln.b", (d2,))
    add(prefix + ".s2.out.w", (d, d2), True)


def heads(x, h):
    """[B, L, h·δ] -> [B, h, L, δ]"""
    B, L, w = x.shape
    return x.reshape(B, L, h, w // h).transpose(1, 2)


def attention1(q, k, v, h, mask):
    """Multi-head attention; mask [Lq, Lk] bool (True = visible) or None."""
    B, Lq, d = q.shape
    q, k, v = heads(q, h), heads(k, h), heads(v, h)
    s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // h)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    o = torch.matmul(torch.softmax(s, -1), v)
    return o.transpose(1, 2).reshape(B, Lq, d)


def attention2(p, l1, l2, u, B, tau, k2):
    """2-simplicial attention: p [B, Q, d2], l1/l2/u [B, K, d2] -> [B, Q, d2]."""
    Bn, Q, d2 = p.shape
    K = l1.shape[1]
    dl = d2 // k2
    p, l1, l2, u = heads(p, k2), heads(l1, k2), heads(l2, k2), heads(u, k2)
    x = torch.einsum("bhic,bhjc->bhij", p, l1)
    y = torch.einsum("bhic,bhkc->bhik", p, l2)
    z = torch.einsum("bhjc,bhkc->bhjk", l1, l2)
    w = (x[:, :, :, :, None, None] * l2[:, :, None, None, :, :]
         - y[:, :, :, None, :, None] * l1[:, :, None, :, None, :]
         + z[:, :, None, :, :, None] * p[:, :, :, None, None, :])  # [B, h, Q, K, K, δ]
    logits = tau * torch.sqrt((w * w).sum(-1) + EPS)
    A = torch.softmax(logits.reshape(Bn, k2, Q, K * K), -1)
    Bh = B.reshape(k2, dl, dl * dl)
    outer = (u[:, :, :, None, :, None] * u[:, :, None, :, None, :]).reshape(Bn, k2, K * K, dl * dl)
    T = torch.einsum("bhtr,hqr->bhtq", outer, Bh)  # [B, h, K², δ]
    o = torch.matmul(A, T)
    return o.transpose(1, 2).reshape(Bn, Q, d2)


def forward(model, x, keys, key_mask, prefix, mode):
    cfg = model.cfg
    d, h, k2 = cfg["d"], cfg["n_heads"], cfg["s2_heads"]
    assert key_mask is None  # both slots read all T state rows
    if mode == "self":
        T, M = x.shape[1], cfg["s2_virtual"]
        n_std = T - M
        qkv = model.lin(x, prefix + ".qkv")
        rows = torch.arange(T)
        mask = (rows[None, :] < n_std) | (rows[:, None] >= n_std)  # [query, key]
        a1 = attention1(qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:], h, mask)
        y = model.lin(a1, prefix + ".out")
    else:
        y = model.mix("mha", x, keys, key_mask, prefix, mode)
    if k2 == 0:
        return y
    d2 = cfg["s2_dim"]
    p = F.linear(x, model.p(prefix + ".s2.p.w"))
    l1, l2, u = F.linear(keys, model.p(prefix + ".s2.luv.w")).split(d2, -1)
    B = model.p(prefix + ".s2.B")
    tau = cfg["s2_tau"]
    if mode == "self":
        o = attention2(p[:, :n_std], l1[:, n_std:], l2[:, n_std:], u[:, n_std:], B, tau, k2)
        a2 = torch.cat([o, u[:, n_std:]], 1)
    else:
        a2 = attention2(p, l1, l2, u, B, tau, k2)
    a2n = F.layer_norm(a2, (d2,), model.p(prefix + ".s2.ln.g"), model.p(prefix + ".s2.ln.b"),
                       ws_ref.LN_EPS)
    return y + F.linear(a2n, model.p(prefix + ".s2.out.w"))


ws_ref.register_mixer("simplicial2", sys.modules[__name__])
