#!/usr/bin/python3
"""Offline retraining with PyTorch DistributedDataParallel: `worldstate-train
retrain` (server/train/offline_retrain.c) for many processes or machines.

Reads step logs in the format of `worldstate-train export` (JSON Lines, one step
per line: "session", "model", "step", "instructions", "queries", "labels"), fine-
tunes a model checkpoint on them with the PyTorch reference of the model
(tests/reference/ws_ref.py: the same parameters under the same names), and writes
a `worldstate-model-1` safetensors checkpoint (with AdamW state) that the daemon
serves after `POST /v1/models/{name}/import` (or `worldstate model import`).

Training is the C retrain's (DESIGN §3): every epoch replays every session from
W_0 in a fresh seeded order, `--batch` sessions at a time per rank;
W_t = U(stopgrad(W_{t-1}), I_t); the targets of a step are its labelled queries
plus `--recall` recall queries drawn from the facts told so far in the session
(the newest 64 distinct facts, each with the last value told, as
server/common/recall.h keeps them; unlabelled queries teach nothing); mean binary
cross-entropy over all targets of the global batch; an AdamW step every
`--update-every` batches with global-norm clipping, linear warmup and cosine
decay over all epochs (model/trainer.c ws_train_lr). Unknown symbols take their
overflow ids: the vocabulary never grows here.

Distribution. The G = ranks x batch trajectory rows form one global batch: every
rank runs the same schedule of sessions onto rows (a row whose session ended takes
the next session of the epoch's order, lowest row first, as the C replay does)
and computes only its own rows. So N ranks of batch B take exactly the steps one
rank of batch N·B takes, and end with the same parameters up to float rounding
(tests/python/test_retrain_ddp.py checks it). Each rank's loss is its rows' BCE sum
scaled by N / (the global count of targets, all-reduced before the forward), so
DDP's gradient average is the global batch mean. Every parameter takes part in
every forward (a zero term), so a rank whose rows are all idle still joins the
gradient all-reduce. Recall draws come from a generator seeded by (seed, epoch,
session), independent of which rank replays the session.

Launch with torchrun (any number of machines), or let the script spawn local
ranks (gloo on loopback, CPU):

  torchrun --nproc_per_node 2 scripts/retrain_ddp.py --checkpoint IN --out OUT --jsonl steps.jsonl
  /usr/bin/python3 scripts/retrain_ddp.py --nproc 2 --checkpoint IN --out OUT --jsonl steps.jsonl

Use the checkpoint the daemon serves (`GET /v1/models/{name}/checkpoint`) and the
model's vocabulary from its database (`--vocab-db DATA_DIR/worldstate.db`, read
only): a checkpoint holds the vocabulary as it was when that version was written,
and symbols the sessions added since have ids there. Rank 0 prints a line per
epoch and one JSON line at the end. Needs Debian's python3-torch and numpy.
"""

import argparse
import contextlib
import json
import math
import os
import socket
import sqlite3
import sys
import time

# One BLAS and OpenMP thread per rank unless told otherwise (ranks are the
# parallelism), and passive waiters: spinning ones steal a shared core.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

REF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference")
sys.path.insert(0, REF)
import mix_compositional  # noqa: E402,F401  (each mix_* module registers its mixer)
import mix_rmc  # noqa: E402,F401
import mix_rn  # noqa: E402,F401
import mix_simplicial2  # noqa: E402,F401
import st  # noqa: E402
import symcode  # noqa: E402
import ws_ref  # noqa: E402

FORMAT = "worldstate-model-1"
RECALL_FACTS = 64  # WS_RECALL_FACTS (server/common/recall.h)


class InputError(Exception):
    """Bad input: a message for the user, exit status 1."""


# What bad input or an unreadable file raises: a message, not a traceback.
USER_ERRORS = (InputError, OSError, sqlite3.Error)


# ---- checkpoints ---------------------------------------------------------------

def load_checkpoint(path):
    """(config dict, config JSON text, vocabulary list, tensors, optim_steps or None)."""
    try:
        tensors, meta = st.load(path)
        if meta.get("format") != FORMAT:
            raise ValueError(f"format is not {FORMAT}")
        cfg = ws_ref.full_config(json.loads(meta["config"]))
        steps = meta.get("optim_steps")
        return cfg, meta["config"], json.loads(meta["vocab"]), tensors, \
            (int(steps) if steps is not None else None)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not a {FORMAT} checkpoint ({e})") from None


def save_checkpoint(path, model, opt, config_text, vocab):
    """Parameters in the C table's order, AdamW moments as adam.m.* / adam.v.*,
    written to a temporary file, fsynced and renamed (as the daemon writes)."""
    tensors, m, v, steps = {}, {}, {}, 0
    for name, p in model.named_c_parameters():
        tensors[name] = p.detach().to(torch.float32).numpy()
        state = opt.state.get(p, {})
        if "exp_avg" in state:
            m[name] = state["exp_avg"].to(torch.float32).numpy()
            v[name] = state["exp_avg_sq"].to(torch.float32).numpy()
            steps = int(state["step"])
        else:  # never stepped: zero moments
            m[name] = v[name] = np.zeros(p.shape, np.float32)
    for name, t in tensors.items():
        if not np.isfinite(t).all():
            raise InputError(f"tensor {name} is not finite: refusing to save")
    tensors.update({"adam.m." + k: x for k, x in m.items()})
    tensors.update({"adam.v." + k: x for k, x in v.items()})
    meta = {"format": FORMAT, "config": config_text,
            "vocab": json.dumps(vocab, ensure_ascii=False, separators=(",", ":")),
            "optim_steps": str(steps)}
    tmp = f"{path}.tmp.{os.getpid()}"
    st.save(tmp, tensors, meta)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def vocab_from_db(path, model):
    """The model's vocabulary in id order from the daemon's SQLite file (read only)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT v.id, v.symbol FROM vocab v JOIN models m ON m.id = v.model "
                          "WHERE m.name = ? ORDER BY v.id", (model,)).fetchall()
    finally:
        db.close()
    if any(i != k for k, (i, _) in enumerate(rows)):
        raise InputError(f"{path}: the vocabulary of {model} has gaps")
    return [s for _, s in rows]


class Vocab:
    """Symbols to (id, hash) as model/vocab.c looks them up without adding: a named
    symbol its id, any other its overflow id cap + FNV-1a-64 mod n_overflow; the
    hash (symcode.sym_hash) seeds the symbol's fixed code."""

    def __init__(self, symbols, cfg):
        if len(symbols) > cfg["vocab_cap"]:
            raise InputError(f"vocabulary of {len(symbols)} symbols over vocab_cap")
        self.symbols = list(symbols)
        self.cap, self.n_overflow = cfg["vocab_cap"], cfg["n_overflow"]
        self.ids = {s: i for i, s in enumerate(self.symbols)}
        self.cache = {}

    def sym(self, s):
        out = self.cache.get(s)
        if out is None:
            fnv = 1469598103934665603
            for byte in s.encode():
                fnv = ((fnv ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
            sid = self.ids.get(s, self.cap + fnv % self.n_overflow)
            h = int(symcode.mix64(np.uint64(fnv)))
            out = self.cache[s] = (sid, h if h else 1)
        return out


# ---- the corpus ----------------------------------------------------------------

def _fact(item, cfg, what):
    """A fact of the log: a tuple of symbols, or ("raw", floats) for a vector."""
    if "fact" in item:
        syms = item["fact"]
        if not (isinstance(syms, list) and 1 <= len(syms) <= cfg["max_fact_len"]
                and all(isinstance(s, str) for s in syms)):
            raise InputError(f"{what}: a fact is 1..{cfg['max_fact_len']} strings")
        return tuple(syms)
    vec = item.get("vector")
    if not isinstance(vec, list) or len(vec) != cfg["d_raw"]:
        raise InputError(f"{what}: vectors of this model have {cfg['d_raw']} numbers")
    return ("raw", [float(x) for x in vec])


class Step:
    """One logged step: instructions [(fact, value)], queries [fact], labels [0/1/-1],
    the logged answers' p (or None) and the model version that answered."""
    __slots__ = ("instr", "queries", "labels", "answers", "version")


def _parse_step(o, cfg, where):
    s = Step()
    s.instr = [(_fact(i, cfg, where), 1 if i["value"] else 0) for i in o.get("instructions", [])]
    s.queries = [_fact(q, cfg, where) for q in o.get("queries", [])]
    labels = o.get("labels")
    if labels is None:
        s.labels = [-1] * len(s.queries)
    elif isinstance(labels, list) and len(labels) == len(s.queries):
        s.labels = [1 if x else 0 for x in labels]
    else:
        raise InputError(f"{where}: labels must be null or one boolean per query")
    answers = o.get("answers")
    s.answers = [a["p"] for a in answers] if isinstance(answers, list) else None
    s.version = o.get("model_version")
    return s


def jsonl_files(paths):
    """The files named, a directory standing for its *.jsonl files in name order."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".jsonl"))
        else:
            out.append(p)
    return out


def load_sessions(paths, model, cfg, rollout=0):
    """{session id: [Step]} from export files (lines of other models skipped; a
    session's lines must hold steps 1, 2, ... as worldstate-train retrain wants);
    returns (sessions, lines skipped)."""
    sessions, skipped = {}, 0
    for path in jsonl_files(paths):
        with open(path, encoding="utf-8") as f:
            for no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                where = f"{path}:{no}"
                try:
                    o = json.loads(line)
                    if o.get("model", model) != model:
                        skipped += 1
                        continue
                    sid, n = o["session"], o["step"]
                    steps = sessions.setdefault(sid, [])
                    last = steps[-1][0] if steps else 0
                    if n != last + 1:
                        raise InputError(f"{where}: session {sid}: step {n} follows step {last}")
                    if rollout <= 0 or n <= rollout:
                        steps.append((n, _parse_step(o, cfg, where)))
                    else:  # keep counting steps past the rollout
                        steps.append((n, None))
                except (ValueError, KeyError, TypeError, AttributeError) as e:
                    raise InputError(f"{where}: {e!r}") from None
    out = {sid: [s for _, s in steps if s is not None] for sid, steps in sessions.items()}
    return {k: v for k, v in out.items() if v}, skipped


# ---- the schedule of sessions onto rows -------------------------------------------

class Row:
    """A trajectory row: a session being replayed, its state and told facts."""

    def __init__(self, session, steps, rng):
        self.session, self.steps, self.pos, self.rng = session, steps, 0, rng
        self.state = None  # W_{t-1} (detached); None: from W_0
        self.told = {}     # fact -> value, oldest first


class Schedule:
    """The global rows of one epoch: G rows, sessions taken in `order`, each row
    advancing one step per iteration; every rank holds the same schedule."""

    def __init__(self, sessions, order, g, seed, epoch):
        self.sessions, self.order, self.next = sessions, order, 0
        self.rows = [None] * g
        self.seed, self.epoch = seed, epoch

    def fill(self):
        """Idle rows take the next sessions; returns how many rows step now."""
        for r in range(len(self.rows)):
            if self.rows[r] is None and self.next < len(self.order):
                k = self.order[self.next]
                self.next += 1
                rng = np.random.default_rng([self.seed, self.epoch, k])
                self.rows[r] = Row(k, self.sessions[k], rng)
        return sum(row is not None for row in self.rows)

    def advance(self):
        for r, row in enumerate(self.rows):
            if row is not None:
                row.pos += 1
                if row.pos == len(row.steps):
                    self.rows[r] = None


def targets(row, step, recall):
    """The step's labelled queries, then `recall` draws (with replacement) among the
    facts told so far in the session, this step's instructions included."""
    for fact, val in step.instr:
        if fact[0] == "raw":
            continue
        row.told.pop(fact, None)
        row.told[fact] = val
        if len(row.told) > RECALL_FACTS:
            del row.told[next(iter(row.told))]
    out = [(q, lab) for q, lab in zip(step.queries, step.labels) if lab >= 0]
    told = list(row.told.items())
    if told and recall:
        out += [told[int(k)] for k in row.rng.integers(0, len(told), min(len(told), recall))]
    return out


# ---- the model ---------------------------------------------------------------------

class StepLoss(nn.Module):
    """One batch step of the reference model: (W_t, logits, loss) with loss =
    scale · Σ BCE over the labelled queries. The zero term makes every parameter
    part of every step, so DDP's all-reduce never waits for a missing gradient."""

    def __init__(self, ref):
        super().__init__()
        self.ref = ref

    def forward(self, batch, scale):
        w_t = self.ref.updater(batch)
        logits = self.ref.extractor(batch, w_t)
        lab = batch["query_label"] >= 0
        bce = F.binary_cross_entropy_with_logits(
            logits[lab], batch["query_label"][lab].to(logits.dtype), reduction="sum")
        zero = sum(p.sum() for p in self.ref.parameters()) * 0.0
        return w_t, logits, bce * scale + zero


def to_sym(vocab, fact):
    return fact if fact[0] == "raw" else [vocab.sym(s) for s in fact]


def make_batch(cfg, vocab, rows, query_lists, dtype):
    """The reference's batch of rows (each at its current step) with these queries."""
    trajs = []
    for row, qs in zip(rows, query_lists):
        step = row.steps[row.pos]
        trajs.append({"from_w0": row.state is None,
                      "instr": [(to_sym(vocab, f), v) for f, v in step.instr],
                      "query": [(to_sym(vocab, f), lab) for f, lab in qs]})
    T, d = cfg["n_state"], cfg["d"]
    w_prev = torch.stack([row.state if row.state is not None else torch.zeros(T, d, dtype=dtype)
                          for row in rows]) if rows else torch.zeros(0, T, d, dtype=dtype)
    return ws_ref.make_batch(cfg, trajs, w_prev, dtype)


def lr_at(a, it, progress):
    """ws_train_lr: linear warmup over `warmup` batches, then cosine decay from lr
    to lr·min_lr_ratio over the run's progress in [0, 1]."""
    if a.warmup > 0 and it < a.warmup:
        return a.lr * (it + 1) / a.warmup
    lo = a.lr * a.min_lr_ratio
    return lo + (a.lr - lo) * 0.5 * (1.0 + math.cos(math.pi * progress))


def idle_batch(cfg, dtype):
    """A rank whose rows are all idle steps one row that tells and asks nothing."""
    return ws_ref.make_batch(cfg, [{"from_w0": True, "instr": [], "query": []}],
                             torch.zeros(1, cfg["n_state"], cfg["d"], dtype=dtype), dtype)


# ---- training ----------------------------------------------------------------------

class Trainer:
    """One rank's model, optimizer and corpus, and where the run stands."""

    def __init__(self, rank, world, a):
        self.rank, self.world, self.a = rank, world, a
        self.dtype = torch.float64 if a.dtype == "float64" else torch.float32
        cfg, self.config_text, vocab, tensors, optim_steps = load_checkpoint(a.checkpoint)
        if a.vocab_db:
            db_vocab = vocab_from_db(a.vocab_db, a.model)
            if db_vocab[:len(vocab)] != vocab:
                raise InputError(f"{a.vocab_db}: the vocabulary of {a.model} does not extend "
                                 f"the checkpoint's")
            vocab = db_vocab
        self.cfg, self.vocab = cfg, Vocab(vocab, cfg)
        by_id, skipped = load_sessions(a.jsonl, a.model, cfg, a.rollout)
        self.sessions = [by_id[s] for s in sorted(by_id)]
        self.total = sum(len(s) for s in self.sessions) * a.epochs
        if self.total == 0:
            raise InputError("no logged steps to train on")

        self.ref = ws_ref.WSRef(cfg, self.dtype)
        try:
            self.ref.load_c({k: v.astype(np.float64) for k, v in tensors.items()})
        except (ValueError, KeyError) as e:
            raise InputError(f"{a.checkpoint}: tensor {e} does not fit its config") from None
        self.model = DistributedDataParallel(StepLoss(self.ref))  # broadcasts rank 0's
        self.opt = torch.optim.AdamW(self.ref.param_groups(a.wd), lr=a.lr, betas=(0.9, 0.999),
                                     eps=1e-8, foreach=True)
        if optim_steps is not None:  # go on from the checkpoint's AdamW moments
            for name, p in self.ref.named_c_parameters():
                self.opt.state[p] = {
                    "step": torch.tensor(float(optim_steps)),
                    "exp_avg": torch.as_tensor(tensors["adam.m." + name], dtype=self.dtype),
                    "exp_avg_sq": torch.as_tensor(tensors["adam.v." + name], dtype=self.dtype)}
        self.params = list(self.ref.parameters())
        self.it = self.done = 0  # batches / global trajectory steps so far
        self.log(f"retrain {a.model} from {a.checkpoint}: {len(self.sessions)} sessions, "
                 f"{self.total // a.epochs} steps"
                 f"{' (lines of other models skipped)' if skipped else ''}, {a.epochs} epochs, "
                 f"{world} ranks x batch {a.batch}, {a.recall} recall queries per step, "
                 f"{len(vocab)} symbols")

    def log(self, line):
        if self.rank == 0:
            print(line, flush=True)

    def epoch(self, e):
        """One pass over every session; the global (loss sum, targets, correct)."""
        a = self.a
        order = np.random.default_rng([a.seed, e]).permutation(len(self.sessions)).tolist()
        sched = Schedule(self.sessions, order, self.world * a.batch, a.seed, e)
        mine_rows = range(self.rank * a.batch, (self.rank + 1) * a.batch)
        sums = torch.zeros(3, dtype=torch.float64)
        while True:
            n_global = sched.fill()
            if n_global == 0:
                break
            mine = [sched.rows[r] for r in mine_rows if sched.rows[r] is not None]
            self.batch_step(mine, sums)
            self.done += n_global
            lr = lr_at(a, self.it - 1, self.done / self.total)
            if self.it % a.update_every == 0:
                self.update(lr)
            sched.advance()
        dist.all_reduce(sums)
        return sums

    def batch_step(self, mine, sums):
        """Forward and backward of this rank's rows (gradients all-reduced only on
        the batch that ends an accumulation); the rows take their new states."""
        a, dtype = self.a, self.dtype
        qs = [targets(row, row.steps[row.pos], a.recall) for row in mine]
        count = torch.tensor([sum(len(q) for q in qs)], dtype=torch.int64)
        dist.all_reduce(count)
        batch = (make_batch(self.cfg, self.vocab, mine, qs, dtype) if mine
                 else idle_batch(self.cfg, dtype))
        self.it += 1
        sync = self.it % a.update_every == 0
        with contextlib.nullcontext() if sync else self.model.no_sync():
            w_t, logits, loss = self.model(batch, self.world / max(int(count), 1) / a.update_every)
            loss.backward()
        with torch.no_grad():
            for k, row in enumerate(mine):
                row.state = w_t[k].detach()
            lab = batch["query_label"]
            if mine and lab.numel():
                sums[0] += float(F.binary_cross_entropy_with_logits(
                    logits, lab.to(logits.dtype), reduction="sum"))
                sums[1] += lab.numel()
                sums[2] += int(((logits >= 0).long() == lab.long()).sum())

    def update(self, lr):
        if self.a.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.a.clip)
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)

    def finish(self):
        """A last partial accumulation still counts (summed locally under no_sync:
        averaged here), as in the C retrain."""
        if self.it % self.a.update_every:
            for p in self.params:
                dist.all_reduce(p.grad)
                p.grad /= self.world
            self.update(lr_at(self.a, self.it, 1.0))


def train(rank, world, a):
    t = Trainer(rank, world, a)
    t_start, c_start = time.perf_counter(), time.process_time()
    for e in range(1, a.epochs + 1):
        t0 = time.perf_counter()
        sums = t.epoch(e)
        loss, n = float(sums[0]) / max(float(sums[1]), 1), int(sums[1])
        t.log(f"epoch {e}/{a.epochs}: loss {loss:.4f}, accuracy "
              f"{100 * float(sums[2]) / max(n, 1):.2f}% on {n} targets (labels and recall), "
              f"{time.perf_counter() - t0:.1f} s")
    t.finish()
    seconds = time.perf_counter() - t_start
    cpu = torch.tensor([time.process_time() - c_start], dtype=torch.float64)
    dist.all_reduce(cpu)  # CPU seconds of all ranks: the cost on a shared machine
    if rank == 0:
        save_checkpoint(a.out, t.ref, t.opt, t.config_text, t.vocab.symbols)
        t.log(json.dumps({"bench": "retrain_ddp", "ranks": world, "batch_per_rank": a.batch,
                          "epochs": a.epochs, "sessions": len(t.sessions), "examples": t.done,
                          "optim_steps": int(t.opt.state[t.params[0]]["step"]),
                          "seconds": round(seconds, 3),
                          "examples_per_s": round(t.done / seconds, 1),
                          "cpu_seconds": round(float(cpu), 3),
                          "examples_per_cpu_s": round(t.done / float(cpu), 1),
                          "loss": round(loss, 5), "out": a.out}))


# ---- launching -----------------------------------------------------------------------

def run_rank(rank, world, a, port):
    """One rank: joins the group (torchrun's environment, or loopback for --nproc)."""
    if port:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        train(rank, world, a)
    finally:
        dist.destroy_process_group()


def _spawned(rank, world, a, port):
    try:
        run_rank(rank, world, a, port)
    except USER_ERRORS as e:
        if rank == 0:
            print(f"retrain_ddp: {e}", file=sys.stderr)
        sys.exit(1)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Fine-tunes a worldstate checkpoint on exported step logs with PyTorch "
                    "DDP (gloo, CPU).")
    p.add_argument("--checkpoint", required=True, help="the checkpoint to start from")
    p.add_argument("--out", required=True, help="the checkpoint to write (rank 0)")
    p.add_argument("--jsonl", action="append", required=True,
                   help="an export file or a directory of *.jsonl (repeatable)")
    p.add_argument("--model", default="default", help="the model whose lines to train on")
    p.add_argument("--vocab-db", help="the daemon's SQLite file: the model's vocabulary")
    p.add_argument("--nproc", type=int, default=0,
                   help="ranks to spawn on this machine (default: torchrun's, else 1)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64, help="sessions at once per rank")
    p.add_argument("--update-every", type=int, default=1, help="batches per AdamW step")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--wd", type=float, default=0.01)
    p.add_argument("--recall", type=int, default=4, help="recall queries per step")
    p.add_argument("--rollout", type=int, default=0, help="only each session's first N steps")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    a = p.parse_args(argv)
    for name in ("epochs", "batch", "update_every", "threads"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if not 0 <= a.recall <= RECALL_FACTS or a.lr <= 0 or a.warmup < 0 or a.nproc < 0:
        p.error("--recall 0..64, --lr > 0, --warmup >= 0, --nproc >= 0")
    return a


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    a = parse_args(argv)
    try:
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ and not a.nproc:  # torchrun
            run_rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), a, 0)
        else:
            n = a.nproc or 1
            torch.multiprocessing.spawn(_spawned, args=(n, a, free_port()), nprocs=n)
    except USER_ERRORS as e:
        print(f"retrain_ddp: {e}", file=sys.stderr)
        return 1
    except torch.multiprocessing.ProcessExitedException:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
