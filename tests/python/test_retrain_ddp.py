#!/usr/bin/python3
"""Offline retraining with PyTorch DDP end to end (scripts/retrain_ddp.py):

  1. a daemon ($WS_DAEMON, loopback, temporary data directory, online training
     off) serves the shipped default model; sessions post labelled steps;
  2. `worldstate-train export` ($WS_TRAIN) writes their logs as JSON Lines;
  3. the PyTorch reference replays every exported session under the checkpoint the
     daemon serves (its download) and gives the answers the daemon logged;
  4. retrain_ddp.py fine-tunes that checkpoint with 2 ranks of batch B and with 1
     rank of batch 2B (float64): the two results hold the same parameters (the
     check that the DDP loss and schedule are right); the result's loss on the
     logged labels is below the start's;
  5. the 2-rank result is imported as the model's next version and serves: new
     sessions' steps are answered under it, and the PyTorch replay under the same
     file gives the same answers and loss.

Needs Debian's python3-torch and numpy (exit 77, "skipped", without them).
Not part of the test suite (minutes on a shared 2-core machine):

  WS_DAEMON=build/server/worldstated WS_TRAIN=build/server/worldstate-train \\
      /usr/bin/python3 tests/python/test_retrain_ddp.py
"""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError:
    print("test_retrain_ddp: skipped (needs python3-torch and numpy)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, HERE)
import retrain_ddp  # noqa: E402
import worldstate as ws  # noqa: E402
from test_client import Daemon  # noqa: E402

TRAIN = os.environ.get("WS_TRAIN", "worldstate-train")
RETRAIN = os.path.join(ROOT, "scripts", "retrain_ddp.py")


def session_steps(rng, k, n_steps, people=3, places=4):
    """A household's steps: fresh names (session k's own), who is where told as
    instructions (a quarter of them retracting), four queries a step labelled
    with the last value told (never told: false)."""
    who = [f"s{k}-person{i}" for i in range(people)]
    where = [f"s{k}-room{j}" for j in range(places)]
    truth, out = {}, []
    for _ in range(n_steps):
        instr = []
        for _ in range(rng.randint(1, 2)):
            fact = (rng.choice(who), "in", rng.choice(where))
            truth[fact] = rng.random() < 0.75
            instr.append({"fact": list(fact), "value": truth[fact]})
        qs = [(rng.choice(who), "in", rng.choice(where)) for _ in range(4)]
        out.append({"instructions": instr, "queries": [{"fact": list(q)} for q in qs],
                    "labels": [truth.get(q, False) for q in qs]})
    return out


def post_sessions(client, rng, first, n, n_steps):
    """n new sessions with n_steps labelled steps each: {id: [step answers]}."""
    out = {}
    for k in range(first, first + n):
        sid = client.create_session()["id"]
        out[sid] = [client.step(sid, s["instructions"], s["queries"], s["labels"],
                                expect_step=i)
                    for i, s in enumerate(session_steps(rng, k, n_steps))]
    return out


def export(data_dir, path):
    with open(path, "w") as f:
        subprocess.run([TRAIN, "export", "--data-dir", data_dir, "--model", "default"], stdout=f,
                       check=True)


def retrain(out, ckpt, jsonl, vocab_db, nproc, batch, dtype="float32"):
    """Runs the script as a user would; returns its JSON summary line."""
    cmd = [sys.executable, RETRAIN, "--nproc", str(nproc), "--batch", str(batch),
           "--checkpoint", ckpt, "--jsonl", jsonl, "--vocab-db", vocab_db, "--out", out,
           "--epochs", "3", "--warmup", "2", "--lr", "1e-3", "--dtype", dtype]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    print(r.stdout, end="")
    return json.loads(r.stdout.strip().splitlines()[-1])


def replay(ckpt, jsonl, vocab_db):
    """Every exported session replayed from W_0 in float64 under ckpt: (p of every
    logged query, the daemon's logged p, labels, versions that answered), flat."""
    cfg, _, vocab, tensors, _ = retrain_ddp.load_checkpoint(ckpt)
    vocab = retrain_ddp.Vocab(retrain_ddp.vocab_from_db(vocab_db, "default"), cfg)
    ref = retrain_ddp.ws_ref.WSRef(cfg, torch.float64)
    ref.load_c({k: v.astype(np.float64) for k, v in tensors.items()})
    sessions, _ = retrain_ddp.load_sessions([jsonl], "default", cfg)
    ours, logged, labels, versions = [], [], [], set()
    with torch.no_grad():
        for steps in sessions.values():
            w = None
            for s in steps:
                row = retrain_ddp.Row(None, [s], None)
                row.state = w
                b = retrain_ddp.make_batch(cfg, vocab, [row], [[(q, -1) for q in s.queries]],
                                           torch.float64)
                wt = ref.updater(b)
                ours += torch.sigmoid(ref.extractor(b, wt)).tolist()
                w = wt[0]
                logged += s.answers
                labels += s.labels
                versions.add(s.version)
    return np.array(ours), np.array(logged), np.array(labels), versions


def bce(p, labels):
    p = np.clip(p, 1e-7, 1 - 1e-7)
    lab = labels >= 0
    return float(-np.mean(labels[lab] * np.log(p[lab]) + (1 - labels[lab]) * np.log(1 - p[lab])))


def main():
    tmp = tempfile.mkdtemp(prefix="ws-ddp-")
    data = os.path.join(tmp, "data")
    os.mkdir(data, 0o700)
    db = os.path.join(data, "worldstate.db")
    d = Daemon(data)
    ok = False
    try:
        c = ws.Client(d.url)
        c.set_training("default", enabled=False)  # one version answers every step
        rng = random.Random(19)
        post_sessions(c, rng, 0, 12, 6)
        steps = os.path.join(tmp, "steps.jsonl")
        export(data, steps)
        version, blob = c.get_checkpoint("default")
        start = os.path.join(tmp, "start.safetensors")
        with open(start, "wb") as f:
            f.write(blob)

        # The reference replays what the C engine answered, on the same checkpoint.
        ours, logged, labels, versions = replay(start, steps, db)
        assert versions == {version}, versions
        diff = float(np.abs(ours - logged).max())
        print(f"start (version {version}): {len(ours)} logged answers, max |p_torch - p_C| "
              f"{diff:.2e}, loss torch {bce(ours, labels):.5f} C {bce(logged, labels):.5f}")
        assert diff < 1e-4, diff

        # 2 ranks of batch 3 == 1 rank of batch 6.
        two = os.path.join(tmp, "two.safetensors")
        one = os.path.join(tmp, "one.safetensors")
        s2 = retrain(two, start, steps, db, 2, 3, "float64")
        s1 = retrain(one, start, steps, db, 1, 6, "float64")
        assert s1["examples"] == s2["examples"] == 3 * 12 * 6, (s1, s2)
        t2, _ = retrain_ddp.st.load(two)
        t1, t0 = retrain_ddp.st.load(one)[0], retrain_ddp.st.load(start)[0]
        worst = max(float(np.abs(t2[k] - t1[k]).max()) for k in t0)
        moved = max(float(np.abs(t2[k] - t0[k]).max()) for k in t0)
        print(f"2 ranks x batch 3 vs 1 rank x batch 6: max parameter difference {worst:.2e} "
              f"(parameters moved up to {moved:.2e})")
        assert moved > 1e-3 and worst < 1e-6, (worst, moved)
        trained, _, _, _ = replay(two, steps, db)
        print(f"loss on the logged labels: start {bce(ours, labels):.5f}, "
              f"retrained {bce(trained, labels):.5f}")
        assert bce(trained, labels) < bce(ours, labels)

        # The result serves: the next version, and new sessions answered under it.
        m = c.import_model("default", two)
        assert not m["created"] and m["version"] == version + 1, m
        new = post_sessions(c, rng, 100, 3, 4)
        everything, served = os.path.join(tmp, "all.jsonl"), os.path.join(tmp, "served.jsonl")
        export(data, everything)
        with open(everything) as f, open(served, "w") as out:
            out.writelines(line for line in f if json.loads(line)["session"] in new)
        ours, logged, labels, versions = replay(two, served, db)
        diff = float(np.abs(ours - logged).max())
        print(f"imported as version {m['version']}: {len(ours)} answers of new sessions, max "
              f"|p_torch - p_C| {diff:.2e}, loss torch {bce(ours, labels):.5f} "
              f"C {bce(logged, labels):.5f}")
        assert versions == {m["version"]}, versions
        assert diff < 1e-4, diff
        ok = True
    finally:
        assert d.stop() == 0
        if ok:
            shutil.rmtree(tmp)
        else:
            print(f"test_retrain_ddp: files kept in {tmp}")
    print("test_retrain_ddp: passed")


if __name__ == "__main__":
    main()
