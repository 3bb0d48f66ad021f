#!/usr/bin/python3
"""A domain rule learned from labels, through the REST API (issue 12, item 3).

The rule: an entity is in exactly one place, so telling its new place makes the
old one false. The shipped default model does not know it: it keeps every fact
at the value told last, so after "mary,location,kitchen" then
"mary,location,garden" it answers both true. A labelled stream teaches it.

Starts worldstated (the build's, on a fresh data directory, loopback) whose
`default` is the shipped model, sets its online training (PATCH
/v1/models/default/training), then posts households one session each: people
placed, then moving (only the new place is told), objects had and given up
(`has` facts, several at a time: no rule, so the rule must stay about places).
Every step asks (--ask balanced, the default) each person's current place and
one other (a place left when there is one), and the `has` facts told, with the
true answers as labels (--ask all: every place of every person and every `has`
fact; --ask moved: every place and `has` fact of the person who moved, only). Every --eval-every labelled steps it waits for the training thread to
catch up, then plays --eval-sessions held-out households (names never seen, no
labels) and scores their last answers: "current" (the place told last),
"former" (a place left: false by the rule), "never" (a place never told),
"has" (told facts without a rule), and "rule": all location answers. It prints
the learning curve (held-out accuracy vs labelled steps, wall time, versions)
and the memory benchmark (bench_memory, K 4, 16, 64 x delay 1, 10, 100, 1000)
of the model before and after, then one JSON line.

Usage: /usr/bin/python3 bench/rules_learn.py [--build build] [--budget 4000]
           [--eval-every 500] [--eval-sessions 24] [--seed 1] [--lr 1e-4]
           [--update-every 8] [--publish-every 1] [--self-supervised on|off] [--gate on|off]
           [--ask balanced|all|moved] [--rehearsal 0] [--people 3] [--places 4] [--config JSON]
           [--target 0.95] [--rules on|off] [--network on|off]
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "clients", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

import worldstate as ws  # noqa: E402
from test_client import Daemon  # noqa: E402  (worldstated on loopback, a port of its choosing)

KINDS = ("current", "former", "never", "has")
MODEL = "default"
_CONS, _VOWELS = "bdfgklmnprstvz", "aeiou"


class World:
    """Households of made-up names from one seed: `people` in `places`, moving
    (only the new place told true), `objects` had (several per person) and let
    go; true state kept beside."""

    def __init__(self, rng, used, people=3, places=4, objects=2):
        self.rng = rng
        self.people = [self._name(used) for _ in range(people)]
        self.places = [self._name(used) + "-room" for _ in range(places)]
        self.objects = [self._name(used) + "-thing" for _ in range(objects)]
        self.where, self.visited, self.has = {}, {p: set() for p in self.people}, {}

    def _name(self, used):
        while True:
            n = "".join(self.rng.choice(_CONS) + self.rng.choice(_VOWELS) for _ in range(3))
            if n not in used:
                used.add(n)
                return n

    def _place(self, p, pl):
        self.where[p] = pl
        self.visited[p].add(pl)
        return [([p, "location", pl], True)]

    def setup(self):
        self.moved = list(self.people)
        return [x for p in self.people for x in self._place(p, self.rng.choice(self.places))]

    def happen(self):
        """One step's instructions: a move, or a `has` fact told true or false."""
        p = self.rng.choice(self.people)
        self.moved = [p]
        if not self.objects or self.rng.random() < 0.7:
            return self._place(p, self.rng.choice([x for x in self.places if x != self.where[p]]))
        o = self.rng.choice(self.objects)
        v = not self.has.get((p, o), False)
        self.has[(p, o)] = v
        return [([p, "has", o], v)]

    def questions(self, balanced=False, only=None):
        """[(fact, kind, truth)] of every person's every place and every has
        fact (only: of those people alone); balanced: each person's current
        place and one other, and the has facts told."""
        out = []
        for p in self.people if only is None else only:
            places = self.places
            if balanced:
                former = sorted(self.visited[p] - {self.where[p]})
                places = [self.where[p], self.rng.choice(former or [x for x in self.places if x != self.where[p]])]
            for pl in places:
                kind = "current" if self.where[p] == pl else "former" if pl in self.visited[p] else "never"
                out.append(([p, "location", pl], kind, kind == "current"))
            for o in self.objects:
                if not balanced or (p, o) in self.has:
                    out.append(([p, "has", o], "has", self.has.get((p, o), False)))
        return out


def play(client, world, moves, label, ask="balanced"):
    """A session of world: its setup, then `moves` steps; every step labelled
    (label) or only the last one asked. Returns (labelled steps, the last
    questions and their answers)."""
    sid = client.create_session(MODEL)["id"]
    n = 0
    for i in range(moves + 1):
        # each step's questions and labels as the world is after that step
        instr = world.setup() if i == 0 else world.happen()
        last = i == moves
        if label:
            qs = world.questions(ask == "balanced", world.moved if ask == "moved" else None)
            client.step(sid, instr, [q for q, _, _ in qs], [t for _, _, t in qs])
            n += 1
        else:
            client.step(sid, instr)
            if last:
                qs = world.questions()
                answers = client.query(sid, [q for q, _, _ in qs])["answers"]
                return n, list(zip(qs, answers))
    return n, None


def status(client):
    return client.get_model(MODEL)["status"]


def drain(client, timeout=600):
    """Waits until the training thread has no example left (so that what the
    stream taught is published or rejected before the held-out play)."""
    end = time.time() + timeout
    while time.time() < end and status(client)["examples_ready"] > 0:
        time.sleep(0.05)


def evaluate(client, seed, n, used, moves, people, places, objects):
    """Held-out accuracy over n unlabelled households of seed: {kind: acc, rule:, all:}."""
    rng = random.Random(seed)
    right = {k: [0, 0] for k in KINDS}
    for _ in range(n):
        _, qa = play(client, World(rng, used, people, places, objects), moves, label=False)
        for (_, kind, truth), a in qa:
            right[kind][0] += (a["p"] >= 0.5) == truth
            right[kind][1] += 1
    out = {k: right[k][0] / right[k][1] for k in KINDS if right[k][1]}
    loc = [right[k] for k in ("current", "former", "never")]
    out["rule"] = sum(r[0] for r in loc) / sum(r[1] for r in loc)
    out["all"] = sum(r[0] for r in right.values()) / sum(r[1] for r in right.values())
    return out


def memory(build, ckpt):
    """bench_memory on ckpt: the mean accuracy over its table (K 4, 16, 64 ×
    delays 1, 10, 100, 1000) and the table's JSON."""
    out = subprocess.run([os.path.join(build, "bench", "bench_memory"), "--checkpoint", ckpt,
                          "--ks", "4,16,64", "--delays", "1,10,100,1000", "--seed", "7"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    js = json.loads([x for x in out.splitlines() if x.startswith("{")][-1])
    rows = js["library"]
    return sum(r["all"] for r in rows) / len(rows), rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--budget", type=int, default=4000, help="labelled steps at most (default 4000)")
    ap.add_argument("--eval-every", type=int, default=500, help="labelled steps between evaluations")
    ap.add_argument("--eval-sessions", type=int, default=24, help="held-out households per evaluation")
    ap.add_argument("--moves", type=int, default=6, help="steps after a household's setup (default 6)")
    ap.add_argument("--people", type=int, default=3, help="per household (default 3)")
    ap.add_argument("--places", type=int, default=4, help="per household (default 4)")
    ap.add_argument("--objects", type=int, default=2, help="per household, for has facts (default 2)")
    ap.add_argument("--ask", choices=("all", "balanced", "moved"), default="balanced",
                    help="labelled questions a step: each person's current place and one other "
                         "(default), every place of every person, or those of the person who moved")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--update-every", type=int, default=8)
    ap.add_argument("--publish-every", type=int, default=1,
                    help="AdamW steps per candidate version (the setting publish_every; default 1)")
    ap.add_argument("--self-supervised", choices=("on", "off"), default="on")
    ap.add_argument("--recall-queries", type=int, default=4)
    ap.add_argument("--negative-queries", type=int, default=4)
    ap.add_argument("--gate", choices=("on", "off"), default="off",
                    help="the publication gate (default off: its memory probe refuses what the rule's "
                         "labels change)")
    ap.add_argument("--gate-tolerance", type=float, default=0.02)
    ap.add_argument("--rehearsal", type=int, default=0,
                    help="trajectories of the task memory trained beside each pass (default 0)")
    ap.add_argument("--target", type=float, default=0.95, help="stop once held-out rule accuracy reaches it")
    ap.add_argument("--config", default=None,
                    help="a model config (JSON) to create through the API and teach, instead of the "
                         "shipped default (e.g. a small one: the ctest's)")
    ap.add_argument("--checkpoint", default=None,
                    help="a model file (safetensors) to import through the API and teach, instead of "
                         "the shipped default")
    ap.add_argument("--scope", choices=("all", "symbols"), default="all",
                    help="what online training changes: every parameter (default) or the symbols' "
                         "corrections alone")
    ap.add_argument("--rules", choices=("on", "off"), default="off",
                    help="the training setting rules: exclusive relations learned from the labels "
                         "as rules and applied (api.md, Rules learned from labels); default off")
    ap.add_argument("--network", choices=("on", "off"), default="on",
                    help="online training of the network (the setting enabled); default on")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    a = ap.parse_args()

    data = tempfile.mkdtemp(prefix="rules-learn-")
    d = Daemon(os.path.join(data, "d"), os.path.join(a.build, "server", "worldstated"),
               ("--batch-wait-us", "0", "--log-level", "warn"))
    c = ws.Client(d.url, timeout=120)
    global MODEL
    try:
        if a.config:
            MODEL = "rules"
            c.create_model(MODEL, config=json.loads(a.config), seed=7)
        elif a.checkpoint:
            MODEL = "rules"
            c.import_model(MODEL, a.checkpoint)
        before_ckpt = os.path.join(data, "before.safetensors")
        with open(before_ckpt, "wb") as f:
            f.write(c.get_checkpoint(MODEL)[1])
        training = c.set_training(MODEL, enabled=a.network == "on", rules=a.rules == "on", lr=a.lr, update_every=a.update_every,
                                  publish_every=a.publish_every,
                                  self_supervised=a.self_supervised == "on", gate=a.gate == "on",
                                  gate_tolerance=a.gate_tolerance, recall_queries=a.recall_queries,
                                  negative_queries=a.negative_queries, rehearsal=a.rehearsal,
                                  scope=a.scope)
        print("training settings:", json.dumps(training))
        used = set()
        train_rng = random.Random(a.seed)
        curve, steps, t0 = [], 0, time.time()

        def point():
            drain(c)
            m = c.get_model(MODEL)
            acc = evaluate(c, 1000003 * a.seed + len(curve), a.eval_sessions, used, a.moves, a.people, a.places,
                           a.objects)
            g = m.get("status", {}).get("gate", m.get("gate", {})) or {}
            row = {"labelled_steps": steps, "seconds": round(time.time() - t0, 1), "version": m["version"],
                   "published": g.get("published"), "rejected": g.get("rejected"), "restored": g.get("restored"),
                   "loss": m["status"].get("last_loss"), "dropped": m["status"].get("examples_dropped"), **acc}
            curve.append(row)
            print("%6d steps %7.1fs  v%-4d rule %.3f (current %.3f former %.3f never %.3f) has %.3f all %.3f loss %s"
                  % (steps, row["seconds"], row["version"], acc["rule"], acc.get("current", -1),
                     acc.get("former", -1), acc.get("never", -1), acc.get("has", -1), acc["all"], row["loss"]),
                  flush=True)
            held = [r["anchor"] for r in m.get("rules", []) if r["holds"]]
            if held:
                print("        rules that hold: %s" % ", ".join(held))
            if g.get("last"):
                last = g["last"]
                print("        last gate: %s %s (replay of %s answers: served %s, candidate %s; anchor v%s; "
                      "%s rejected, %s restored)"
                      % (last.get("verdict"), last.get("reason"), last["candidate"].get("replay_answers"),
                         last["served"].get("replay_accuracy"), last["candidate"].get("replay_accuracy"),
                         g.get("anchor_version"), g.get("rejected"), g.get("restored")))
            return acc["rule"]

        print("%6s %8s  %-5s %s" % ("steps", "wall", "ver", "held-out accuracy (households never seen)"))
        point()
        while steps < a.budget:
            goal = min(a.budget, steps + a.eval_every)
            while steps < goal:
                n, _ = play(c, World(train_rng, used, a.people, a.places, a.objects), a.moves, label=True, ask=a.ask)
                steps += n
                # Training runs at what CPU serving leaves; the stream waits for
                # it (else the oldest examples are dropped) so every step teaches.
                while status(c)["examples_ready"] > 32:
                    time.sleep(0.02)
            if point() >= a.target:
                break
        after_ckpt = os.path.join(data, "after.safetensors")
        with open(after_ckpt, "wb") as f:
            f.write(c.get_checkpoint(MODEL)[1])
        if a.config:  # the memory benchmark is for the shipped default's kind of model
            print(json.dumps({"bench": "rules_learn", "config": json.loads(a.config), "settings": training,
                              "curve": curve}))
            return
        mem_before, _ = memory(a.build, before_ckpt)
        mem_after, _ = memory(a.build, after_ckpt)
        print("memory benchmark (bench_memory K 4,16,64 x delay 1,10,100,1000, mean): before %.4f after %.4f"
              " (%+.2f points)" % (mem_before, mem_after, 100 * (mem_after - mem_before)))
        print(json.dumps({"bench": "rules_learn", "settings": training, "curve": curve,
                          "memory_before": mem_before, "memory_after": mem_after}))
    finally:
        d.stop()
        if not a.keep:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
