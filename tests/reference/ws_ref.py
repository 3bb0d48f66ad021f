"""PyTorch reference of the worldstate Updater-Extractor model (DESIGN §2-§3).

The parameters carry exactly the names and shapes of the C table (model/params.c),
so golden files and checkpoints map one to one. The model computes on ragged
batches given in the same flat layout as the golden files (tests/golden/*):

  from_w0  [B]  int   1: the trajectory starts from the learned state.w0
  n_instr  [B]  int   instructions per trajectory (rows in trajectory order)
  n_query  [B]  int   queries per trajectory
  instr_ids [N_i,S] int  symbol ids, -1 padded (raw facts are all -1)
  instr_hash [N_i,S] uint64 (numpy; optional)  symbol hashes seeding the fixed codes
                   (symcode.py), 0 = none; a symbol is present where id >= 0 or hash != 0
  instr_raw_row [N_i] int  -1 symbolic, else the row of instr_raw
  instr_raw [n_raw,d_raw] float,  instr_val [N_i] int (0/1)
  query_ids, query_raw_row, query_raw as above, query_label [N_q] (0/1, -1 unlabelled)
  w_prev [B,T,d] float  previous states (rows of from_w0 trajectories ignored)

Internally the ragged lists are scattered into padded [B, L, d] tensors with a key
mask (only the context C_b = [ctx.null; instructions of b] is ever ragged on the
key side; the state keys are always T), so each trajectory sees only its own data;
self_check() verifies that against one-trajectory-at-a-time runs.

Works in float64 (golden files) and float32 (benchmark peer). Run this file to
execute the self-checks.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import symcode

CONFIG_KEYS = ("d", "n_heads", "n_state", "n_upd_layers", "n_ext_layers", "max_fact_len",
               "vocab_cap", "n_overflow", "d_raw", "state_norm")

# The fields a config may leave out (model/model.h), with the value they then take
# in a checkpoint (model/config.c): the mixer fields' defaults, symbol_code "table"
# and empty_steps "update", what checkpoints written before those fields did.
OPTIONAL_FIELDS = {"upd_mixer": "mha", "ext_mixer": "mha", "s2_virtual": 2, "s2_heads": 1,
                   "s2_dim": 32, "s2_tau": 1.0, "comp_searches": 4, "comp_retrievals": 2,
                   "comp_dim": 16, "rn_width": 64, "rn_layers": 2, "symbol_code": "table",
                   "empty_steps": "update", "views": 1}

# Mixers by name (model/mixer.h). A block mixer provides
#   layout(add, linear, ln, prefix, cfg, mode)     its tensors "<prefix>.<name>" in C order
#   forward(model, x, keys, key_mask, prefix, mode) -> [B, Lq, d]
# (mode "self" or "cross"; x is the LayerNorm'd query side [B, Lq, d], keys [B, Lk, d],
# key_mask [B, Lk] bool or None); an Updater variant (kind "updater")
#   layout(add, linear, ln, cfg)  and  updater(model, X, C, cmask, M_prev) -> W_t [B, T, d]
# (X = M_prev + state.pos, M_prev = W_{t-1} or W_0 per trajectory); a readout variant
# (kind "readout")  layout(add, linear, ln, cfg)  and  readout(model, q, w, traj) -> [N_q]
# (q = LN_o(Q) rows [N_q, d], w [B, T, d], traj [N_q] the trajectory of each query).
# Mixer modules register themselves here (tests/reference/mix_*.py).
MIXERS = {}


def register_mixer(name, module):
    MIXERS[name] = module


def full_config(cfg):
    """cfg with every field: integers, the mixer names as strings, s2_tau a float."""
    out = {k: int(cfg[k]) for k in CONFIG_KEYS}
    for k, v in OPTIONAL_FIELDS.items():
        val = cfg.get(k, v)
        out[k] = val if isinstance(v, str) else type(v)(val)
    return out

LN_EPS = 1e-5


def mha_layout(linear, prefix, d, mode):
    """The mha mixer's tensors (model/mixer_mha.c), for mixers that extend it."""
    if mode == "self":
        linear(prefix + ".qkv", 3 * d, d)
    else:
        linear(prefix + ".q", d, d)
        linear(prefix + ".kv", 2 * d, d)
    linear(prefix + ".out", d, d)


def param_layout(cfg):
    """[(name, shape, decay)] in the order of model/params.c."""
    d, T, S = cfg["d"], cfg["n_state"], cfg["max_fact_len"]
    V = cfg["vocab_cap"] + cfg["n_overflow"]
    out = []

    def add(name, shape, decay=False):
        out.append((name, tuple(shape), decay))

    def ln(prefix):
        add(prefix + ".g", (d,))
        add(prefix + ".b", (d,))

    def linear(prefix, n_out, n_in):
        add(prefix + ".w", (n_out, n_in), True)
        add(prefix + ".b", (n_out,))

    def mixer(name, prefix, mode):
        if name == "mha":
            mha_layout(linear, prefix, d, mode)
        else:
            MIXERS[name].layout(add, linear, ln, prefix, cfg, mode)

    upd_variant = getattr(MIXERS.get(cfg["upd_mixer"]), "kind", None) == "updater"
    readout = getattr(MIXERS.get(cfg["ext_mixer"]), "kind", None) == "readout"

    def mlp(prefix):
        linear(prefix + ".mlp.fc", 4 * d, d)
        linear(prefix + ".mlp.proj", d, 4 * d)

    add("embed.sym", (V, d))
    add("embed.slot", (S, d))
    add("embed.val", (2, d))
    if cfg["d_raw"] > 0:
        add("embed.raw", (d, cfg["d_raw"]), True)
    ln("embed.ln")
    add("state.w0", (T, d))
    add("state.pos", (T, d))
    add("ctx.null", (1, d))
    if upd_variant:
        MIXERS[cfg["upd_mixer"]].layout(add, linear, ln, cfg)
    else:
        for l in range(cfg["n_upd_layers"]):
            p = f"upd.{l}"
            ln(p + ".ln1")
            mixer(cfg["upd_mixer"], p + ".self", "self")
            ln(p + ".ln2")
            mixer("mha", p + ".cross", "cross")
            ln(p + ".ln3")
            mlp(p)
        if cfg["state_norm"]:
            ln("upd.ln")
    for l in range(cfg["n_ext_layers"]):
        p = f"ext.{l}"
        ln(p + ".ln1")
        mixer("mha" if readout else cfg["ext_mixer"], p + ".cross", "cross")
        ln(p + ".ln2")
        mlp(p)
    ln("ext.ln")
    if readout:
        MIXERS[cfg["ext_mixer"]].layout(add, linear, ln, cfg)
    else:
        linear("ext.head", 1, d)
    return out


def _key(name):
    # nn.Module names cannot contain '.'; the C names never contain "__".
    return name.replace(".", "__")


def pad_ragged(rows, counts):
    """rows [N, d] in trajectory order, counts [B] -> (padded [B, L, d], mask [B, L]
    bool or None when every trajectory is full, (traj, pos) index of each row)."""
    B = counts.numel()
    L = int(counts.max()) if B else 0
    traj = torch.repeat_interleave(torch.arange(B, device=rows.device), counts)
    start = torch.cumsum(counts, 0) - counts
    pos = torch.arange(rows.shape[0], device=rows.device) - start[traj]
    if rows.shape[0] == B * L:  # every trajectory full: a plain reshape
        return rows.reshape(B, L, rows.shape[1]), None, (traj, pos)
    padded = rows.new_zeros(B, L, rows.shape[1]).index_put((traj, pos), rows)
    mask = torch.arange(L, device=rows.device)[None, :] < counts[:, None]
    return padded, mask, (traj, pos)


class WSRef(nn.Module):
    def __init__(self, cfg, dtype=torch.float64):
        super().__init__()
        self.cfg = full_config(cfg)
        c = self.cfg
        assert c["d"] % c["n_heads"] == 0
        self.layout = param_layout(c)
        self.store = nn.ParameterDict(
            {_key(n): nn.Parameter(torch.zeros(s, dtype=dtype)) for n, s, _ in self.layout})

    # ---- parameters under their C names -----------------------------------
    def p(self, name):
        return self.store[_key(name)]

    def c_names(self):
        return [n for n, _, _ in self.layout]

    def named_c_parameters(self):
        for n, _, _ in self.layout:
            yield n, self.p(n)

    def load_c(self, tensors, prefix=""):
        """Copies tensors[prefix + name] (arrays) into every parameter."""
        with torch.no_grad():
            for n, s, _ in self.layout:
                t = torch.as_tensor(tensors[prefix + n])
                if tuple(t.shape) != s:
                    raise ValueError(f"{n}: shape {tuple(t.shape)}, expected {s}")
                self.p(n).copy_(t)

    def init_random(self, gen, std=0.3, bias_std=0.1, ln_std=0.1):
        """Large-ish random init (golden files want gradients that are not tiny):
        N(0, std) matrices and embeddings, N(0, bias_std) biases, LN gains
        1 + ln_std·N(0,1) and biases ln_std·N(0,1)."""
        with torch.no_grad():
            for n, s, _ in self.layout:
                z = torch.randn(s, generator=gen, dtype=torch.float64)
                is_ln = ".ln" in n or n.startswith("ext.ln") or n.startswith("upd.ln")
                if is_ln and n.endswith(".g"):
                    v = 1.0 + ln_std * z
                elif is_ln:
                    v = ln_std * z
                elif n.endswith(".b"):
                    v = bias_std * z
                else:
                    v = std * z
                self.p(n).copy_(v)

    def param_groups(self, weight_decay):
        decay = [self.p(n) for n, _, dec in self.layout if dec]
        rest = [self.p(n) for n, _, dec in self.layout if not dec]
        return [{"params": decay, "weight_decay": weight_decay},
                {"params": rest, "weight_decay": 0.0}]

    # ---- building blocks ---------------------------------------------------
    def ln(self, x, prefix):
        return F.layer_norm(x, (x.shape[-1],), self.p(prefix + ".g"), self.p(prefix + ".b"),
                            LN_EPS)

    def lin(self, x, prefix):
        return F.linear(x, self.p(prefix + ".w"), self.p(prefix + ".b"))

    def mha(self, q, k, v, key_mask):
        """q [B,Lq,d], k/v [B,Lk,d], key_mask [B,Lk] bool (True = visible) or None."""
        B, Lq, d = q.shape
        Lk = k.shape[1]
        h = self.cfg["n_heads"]
        dh = d // h
        q = q.reshape(B, Lq, h, dh).transpose(1, 2)
        k = k.reshape(B, Lk, h, dh).transpose(1, 2)
        v = v.reshape(B, Lk, h, dh).transpose(1, 2)
        s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(dh))
        if key_mask is not None:
            s = s.masked_fill(~key_mask[:, None, None, :], float("-inf"))
        o = torch.matmul(torch.softmax(s, dim=-1), v)
        return o.transpose(1, 2).reshape(B, Lq, d)

    def mix(self, name, x, keys, key_mask, prefix, mode):
        """The branch of a mixer sub-block (x LayerNorm'd; keys is x in self mode)."""
        if name != "mha":
            return MIXERS[name].forward(self, x, keys, key_mask, prefix, mode)
        d = self.cfg["d"]
        if mode == "self":
            qkv = self.lin(x, prefix + ".qkv")
            a = self.mha(qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:], None)
        else:
            q = self.lin(x, prefix + ".q")
            kv = self.lin(keys, prefix + ".kv")
            a = self.mha(q, kv[..., :d], kv[..., d:], key_mask)
        return self.lin(a, prefix + ".out")

    def cross_block(self, x, keys, key_mask, prefix, ln_name, mixer="mha"):
        h = self.ln(x, prefix + "." + ln_name)
        return x + self.mix(mixer, h, keys, key_mask, prefix + ".cross", "cross")

    def mlp_block(self, x, prefix, ln_name):
        h = self.ln(x, prefix + "." + ln_name)
        h = F.gelu(self.lin(h, prefix + ".mlp.fc"), approximate="tanh")
        return x + self.lin(h, prefix + ".mlp.proj")

    # ---- the model ---------------------------------------------------------
    def embed_facts(self, ids, raw_row, raw, hashes=None):
        """ids [N,S] (-1 padded), raw_row [N] (-1 symbolic), raw [n_raw,d_raw], hashes
        [N,S] uint64 or None -> f [N,d]. Under symbol_code "hashed" each symbol adds
        its fixed code; under "table" a symbol given by hash alone takes its overflow
        bucket (as the C plan does)."""
        ids = ids.long()
        dt = self.p("embed.sym").dtype
        h = (np.zeros(tuple(ids.shape), dtype=np.uint64) if hashes is None
             else np.asarray(hashes, dtype=np.uint64))
        has_hash = torch.from_numpy(h != 0)
        if self.cfg["symbol_code"] == "table":
            bucket = torch.from_numpy((h % np.uint64(self.cfg["n_overflow"])).astype(np.int64))
            ids = torch.where((ids < 0) & has_hash, self.cfg["vocab_cap"] + bucket, ids)
        present = ((ids >= 0) | has_hash).to(dt)      # [N,S]: 1 where a symbol is
        with_id = (ids >= 0).to(dt)
        # Σ_i E_sym[id_i] over symbols with ids, Σ_i code_i, plus Σ_i present_i·E_slot[i]
        u = (F.embedding_bag(ids.clamp(min=0), self.p("embed.sym"), mode="sum",
                             per_sample_weights=with_id)
             + present @ self.p("embed.slot")[:ids.shape[1]])
        if self.cfg["symbol_code"] == "hashed":
            u = u + torch.from_numpy(symcode.fact_codes(h, self.cfg["d"])).to(dt)
        if raw is not None and raw.shape[0] > 0:
            raw_row = raw_row.long()
            ur = F.linear(raw.to(u.dtype), self.p("embed.raw"))
            u = torch.where((raw_row >= 0)[:, None], ur[raw_row.clamp(min=0)], u)
        return self.ln(u, "embed.ln")

    def context(self, batch):
        """Padded contexts C [B, 1+max_instr, d] and their key mask."""
        B = batch["n_instr"].numel()
        d = self.cfg["d"]
        null = self.p("ctx.null").reshape(1, 1, d).expand(B, 1, d)
        if batch["instr_ids"].shape[0] == 0:
            return null, None
        f = self.embed_facts(batch["instr_ids"], batch["instr_raw_row"], batch.get("instr_raw"),
                             batch.get("instr_hash"))
        tok = f + F.embedding(batch["instr_val"].long(), self.p("embed.val"))
        padded, mask, _ = pad_ragged(tok, batch["n_instr"].long())
        C = torch.cat([null, padded], 1)
        if mask is not None:
            mask = torch.cat([mask.new_ones(B, 1), mask], 1)
        return C, mask

    def updater(self, batch):
        """W_t [B, T, d]. w_prev is a constant; from_w0 rows use (and train) state.w0."""
        c = self.cfg
        B, T, d = batch["n_instr"].numel(), c["n_state"], c["d"]
        w0 = self.p("state.w0")[None].expand(B, T, d)
        w_prev = batch.get("w_prev")
        if w_prev is None:
            X = w0
        else:
            from_w0 = batch["from_w0"].bool()[:, None, None]
            X = torch.where(from_w0, w0, w_prev.detach().to(w0.dtype))
        M_prev = X
        W = self.updater_layers(batch, X + self.p("state.pos"), M_prev)
        if c["empty_steps"] == "update" or w_prev is None:
            return W
        # "hold": a trajectory told nothing keeps its previous state (not from W_0)
        hold = ((batch["n_instr"] == 0) & ~batch["from_w0"].bool())[:, None, None]
        return torch.where(hold, M_prev, W)

    def updater_layers(self, batch, X, M_prev):
        """The Updater's layers on X = the previous state + positions."""
        c = self.cfg
        C, cmask = self.context(batch)
        variant = MIXERS.get(c["upd_mixer"])
        if getattr(variant, "kind", None) == "updater":
            return variant.updater(self, X, C, cmask, M_prev)
        for l in range(c["n_upd_layers"]):
            p = f"upd.{l}"
            h = self.ln(X, p + ".ln1")
            X = X + self.mix(c["upd_mixer"], h, h, None, p + ".self", "self")
            X = self.cross_block(X, C, cmask, p, "ln2")
            X = self.mlp_block(X, p, "ln3")
        return self.ln(X, "upd.ln") if c["state_norm"] else X

    def extractor(self, batch, w):
        """Logits [N_q] of the batch's queries on states w [B, T, d]."""
        if batch["query_ids"].shape[0] == 0:
            return w.new_zeros(0)
        f = self.embed_facts(batch["query_ids"], batch["query_raw_row"], batch.get("query_raw"),
                             batch.get("query_hash"))
        Q, qmask, (traj, pos) = pad_ragged(f, batch["n_query"].long())
        readout = MIXERS.get(self.cfg["ext_mixer"])
        readout = readout if getattr(readout, "kind", None) == "readout" else None
        mixer = "mha" if readout else self.cfg["ext_mixer"]
        for l in range(self.cfg["n_ext_layers"]):
            p = f"ext.{l}"
            # keys: the T state tokens, all valid
            Q = self.cross_block(Q, w, None, p, "ln1", mixer)
            Q = self.mlp_block(Q, p, "ln2")
        # back to one row per query, in batch order
        q = Q.reshape(-1, Q.shape[-1]) if qmask is None else Q[traj, pos]
        q = self.ln(q, "ext.ln")
        if readout:
            return readout.readout(self, q, w, traj)
        return F.linear(q, self.p("ext.head.w"), self.p("ext.head.b"))[:, 0]

    @staticmethod
    def loss(logits, labels):
        lab = labels >= 0
        if not bool(lab.any()):
            return logits.sum() * 0.0
        return F.binary_cross_entropy_with_logits(logits[lab], labels[lab].to(logits.dtype))

    def forward(self, batch):
        views = int(self.cfg.get("views", 1))
        if views > 1:
            return self.forward_views(batch, views)
        w_t = self.updater(batch)
        logits = self.extractor(batch, w_t)
        return w_t, logits, self.loss(logits, batch["query_label"])

    def forward_views(self, batch, views):
        """A model of several views (model/views.c): trajectory i runs as trajectories
        i*views + v of view_batch; its W_t is theirs one after another [B, views*T, d]
        and a query's logit the mean of its views' logits."""
        vb = view_batch(batch, views, self.cfg["n_state"])
        w_t = self.updater(vb)
        logits = self.extractor(vb, w_t)
        B = batch["n_query"].numel()
        means, at = [], 0
        for n in batch["n_query"].long().tolist():  # view_batch's order: trajectory, view
            means.append(logits[at:at + views * n].reshape(views, n).mean(dim=0))
            at += views * n
        lg = torch.cat(means) if means else logits[:0]
        return w_t.reshape(B, views * w_t.shape[1], -1), lg, self.loss(lg, batch["query_label"])


# ---- batches ----------------------------------------------------------------

def make_batch(cfg, trajs, w_prev=None, dtype=torch.float64):
    """trajs: [{"from_w0": bool, "instr": [(fact, value)], "query": [(fact, label)]}]
    where a fact is a list of symbols or a raw vector given as ("raw", [floats]); a
    symbol is an id, or (id, hash) with id -1 for a symbol known by its hash alone.
    Returns the flat batch dict (torch tensors) described at the top."""
    S, d_raw = cfg["max_fact_len"], cfg["d_raw"]

    def facts(kind):
        ids, hashes, raw_row, raw, vals = [], [], [], [], []
        for t in trajs:
            for fact, v in t[kind]:
                if isinstance(fact, tuple) and fact[0] == "raw":
                    assert len(fact[1]) == d_raw
                    ids.append([-1] * S)
                    hashes.append([0] * S)
                    raw_row.append(len(raw))
                    raw.append(list(fact[1]))
                else:
                    assert 1 <= len(fact) <= S
                    pad = S - len(fact)
                    ids.append([x[0] if isinstance(x, tuple) else x for x in fact] + [-1] * pad)
                    hashes.append([x[1] if isinstance(x, tuple) else 0 for x in fact] + [0] * pad)
                    raw_row.append(-1)
                vals.append(v)
        facts.hashes = np.array(hashes, dtype=np.uint64).reshape(-1, S)
        return (torch.tensor(ids, dtype=torch.int32).reshape(-1, S),
                torch.tensor(raw_row, dtype=torch.int32),
                torch.tensor(raw, dtype=dtype).reshape(len(raw), d_raw),
                torch.tensor(vals, dtype=torch.int32))

    b = {
        "from_w0": torch.tensor([1 if t["from_w0"] else 0 for t in trajs], dtype=torch.int32),
        "n_instr": torch.tensor([len(t["instr"]) for t in trajs], dtype=torch.int32),
        "n_query": torch.tensor([len(t["query"]) for t in trajs], dtype=torch.int32),
    }
    b["instr_ids"], b["instr_raw_row"], b["instr_raw"], b["instr_val"] = facts("instr")
    b["instr_hash"] = facts.hashes
    b["query_ids"], b["query_raw_row"], b["query_raw"], b["query_label"] = facts("query")
    b["query_hash"] = facts.hashes
    if w_prev is not None:
        b["w_prev"] = torch.as_tensor(w_prev, dtype=dtype)
    return b


def split_batch(batch, i):
    """The one-trajectory batch of trajectory i (for the isolation check)."""
    ni, nq = batch["n_instr"].long(), batch["n_query"].long()
    i0, q0 = int(ni[:i].sum()), int(nq[:i].sum())
    i1, q1 = i0 + int(ni[i]), q0 + int(nq[i])

    def sub(prefix, a, b_):
        rows = batch[prefix + "_raw_row"][a:b_].long()
        used = rows[rows >= 0]
        raw = batch[prefix + "_raw"][used] if used.numel() else batch[prefix + "_raw"][:0]
        remap = torch.full_like(rows, -1)
        remap[rows >= 0] = torch.arange(used.numel())
        return batch[prefix + "_ids"][a:b_], remap.to(torch.int32), raw, \
            (batch[prefix + "_hash"][a:b_] if prefix + "_hash" in batch else None)

    out = {"from_w0": batch["from_w0"][i:i + 1], "n_instr": batch["n_instr"][i:i + 1],
           "n_query": batch["n_query"][i:i + 1]}
    out["instr_ids"], out["instr_raw_row"], out["instr_raw"], out["instr_hash"] = \
        sub("instr", i0, i1)
    out["instr_val"] = batch["instr_val"][i0:i1]
    out["query_ids"], out["query_raw_row"], out["query_raw"], out["query_hash"] = \
        sub("query", q0, q1)
    out["query_label"] = batch["query_label"][q0:q1]
    if "w_prev" in batch:
        out["w_prev"] = batch["w_prev"][i:i + 1]
    return out


# base/ws_rng.h WS_RNG_GOLDEN
GOLDEN = 0x9E3779B97F4A7C15


def view_hashes(h, view):
    """model/views.c ws_view_hash on uint64 hashes: view 0, and absent symbols (0),
    keep theirs; else mix64(hash ^ view*GOLDEN), never 0."""
    h = np.asarray(h, dtype=np.uint64)
    if view == 0:
        return h
    m = symcode.mix64(h ^ np.uint64((view * GOLDEN) & symcode._M64))
    m = np.where(m == 0, np.uint64(1), m)
    return np.where(h == 0, h, m)


def concat_batches(parts):
    """The batches' trajectories one after another in one batch (raw rows renumbered)."""
    out = {k: torch.cat([p[k] for p in parts]) for k in ("from_w0", "n_instr", "n_query",
                                                          "instr_val", "query_label", "w_prev")}
    for prefix in ("instr", "query"):
        rows, off = [], 0
        for p in parts:
            r = p[prefix + "_raw_row"].long().clone()
            r[r >= 0] += off
            off += p[prefix + "_raw"].shape[0]
            rows.append(r.to(torch.int32))
        out[prefix + "_raw_row"] = torch.cat(rows)
        out[prefix + "_raw"] = torch.cat([p[prefix + "_raw"] for p in parts])
        out[prefix + "_ids"] = torch.cat([p[prefix + "_ids"] for p in parts])
        if parts[0].get(prefix + "_hash") is not None:
            out[prefix + "_hash"] = np.concatenate([p[prefix + "_hash"] for p in parts])
    return out


def view_batch(batch, views, T):
    """The batch of a model of `views` views as its plan runs it (model/views.c):
    trajectory i's view v is trajectory i*views + v, its facts with their hashes
    mixed with v (view_hashes), its previous state rows [v*T, (v+1)*T) of w_prev."""
    parts = []
    for i in range(batch["n_query"].numel()):
        one = split_batch(batch, i)
        for v in range(views):
            p = dict(one)
            for prefix in ("instr", "query"):
                if one.get(prefix + "_hash") is not None:
                    p[prefix + "_hash"] = view_hashes(one[prefix + "_hash"], v)
            p["w_prev"] = one["w_prev"][:, v * T:(v + 1) * T]
            parts.append(p)
    return concat_batches(parts)


def self_check(model, batch, tol=1e-10):
    """Each trajectory run alone gives the same W_t and logits as inside the batch
    (no trajectory sees another's data). Raises AssertionError otherwise; returns the worst difference."""
    worst = 0.0
    with torch.no_grad():
        w_all, lg_all, _ = model(batch)
        q0 = 0
        for i in range(batch["n_instr"].numel()):
            w_i, lg_i, _ = model(split_batch(batch, i))
            nq = int(batch["n_query"][i])
            worst = max(worst, float((w_i[0] - w_all[i]).abs().max()))
            if nq:
                worst = max(worst, float((lg_i - lg_all[q0:q0 + nq]).abs().max()))
            q0 += nq
    assert worst <= tol, f"ragged-batch isolation check failed: max diff {worst}"
    return worst


if __name__ == "__main__":
    cfg = {"d": 16, "n_heads": 2, "n_state": 4, "n_upd_layers": 2, "n_ext_layers": 1,
           "max_fact_len": 3, "vocab_cap": 10, "n_overflow": 2, "d_raw": 3, "state_norm": 1}
    g = torch.Generator().manual_seed(0)
    m = WSRef(cfg)
    m.init_random(g)
    trajs = [
        {"from_w0": True, "instr": [([1, 2], 1), (("raw", [0.5, -1.0, 2.0]), 0)],
         "query": [([3], 1), (("raw", [1.0, 1.0, 1.0]), -1)]},
        {"from_w0": False, "instr": [], "query": [([4, 5, 11], 0)]},
        {"from_w0": False, "instr": [([7], 0), ([8, 8], 1), ([9], 1)], "query": []},
    ]
    b = make_batch(cfg, trajs, torch.randn(3, 4, 16, generator=g, dtype=torch.float64))
    print("isolation check: max diff", self_check(m, b))
