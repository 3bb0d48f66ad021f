#!/usr/bin/env python3
"""A house assistant on worldstated, scored on households nobody has seen.

    python3 clients/python/example_assistant.py [--url URL] [--key KEY] [--model NAME]
        [--runs N] [--steps N] [--delay N] [--seed N] [--label] [--rule] [--block N]
        [--verbose] [--json]

Each run draws a random household with made-up names (people such as
"kelomir", places such as "vunaso-attic", objects such as "ritepa-lamp",
events such as "zokadu-party"), opens a fresh session and tells the service
only what happens, one step at a time:

    someone is somewhere         [person, "location", place] = true
    someone moves                the new place true AND the old place false
    an object lies somewhere     [object, "location", place] = true
    someone picks it up          [object, "location", place] = false, [person, "has", object] = true
    someone puts it down         [person, "has", object] = false, [object, "location", place] = true
    someone gives it away        [giver, "has", object] = false, [taker, "has", object] = true,
                                 [giver, "gave", object, taker] = true (models with 4-symbol facts)
    a lamp is switched on/off    [object, "on"] = true / false
    an event starts / ends       [event, "at", place] = true / false

(at most 4 instructions a step, facts of 2 to 4 symbols). After the day (and
--delay silent steps) it asks, in one more step without instructions, where
everybody and everything is, who has what, what is on, where the events are, and
a few questions about names never mentioned, and scores the answers ("holds",
p >= 0.5) against the household's true state: a fact told holds at the value
told last; a fact never told does not hold (closed world). Questions come in
three kinds: "holds now" (told, last told true), "told false" (told, last told
false: the place someone left, a lamp switched off) and "never told".

The relation words ("location", "has", "gave", "on", "at") are this app's fixed
vocabulary; every name is fresh: no two households of one run share a name,
and with millions of possible names per kind, runs rarely do. The model has
never seen these names, so what it gets right it gets from what it was told in
the session. It is not told the household's rules (a person is in one place at
a time): that is why a move tells both facts. With --label the true answers
are sent as labels after the answers came (PUT .../labels), and a model with
online training learns from them.

With --rule a move tells only the new place: that the old one no longer holds
is the household's rule (a person is in one place at a time), which the shipped
default does not know (it keeps a fact at the value told last). The places
people left are then asked as a kind of their own, "left (rule)"; with --label
the labels teach the rule, and --block N prints the accuracy of every N runs
(households never seen before), so whether it is learned shows run after run.
With the model's training setting "rules" on (`worldstate training default
--rules`), the labels of the first households teach the service that `location`
is exclusive, and from then on it tells the old place false itself (api.md,
Rules learned from labels): --rule --label --block 20 shows it.

Exit status: 0 done, 1 the service answered an error or could not be reached,
2 bad command line.
"""

import argparse
import json
import random
import sys

from worldstate import Client, WorldstateError

ROOMS = ["kitchen", "garden", "attic", "hall", "study", "cellar", "porch", "bedroom"]
THINGS = ["keys", "book", "umbrella", "mug", "scarf", "wallet"]
SWITCHABLE = ["lamp", "radio", "kettle", "heater"]
HAPPENINGS = ["party", "storm", "delivery", "concert", "visit", "leak"]
KINDS = ("holds now", "told false", "never told", "left (rule)")
MAX_INSTR = 4      # instructions per step, as the default model was trained
MAX_QUERIES = 256  # per request (api.md, Limits)

_CONS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


class Namer:
    """Made-up names, never the same twice from one Namer."""

    def __init__(self, rng):
        self.rng = rng
        self.used = set()

    def _fresh(self, make):
        while True:
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name

    def _word(self, syllables):
        return "".join(self.rng.choice(_CONS) + self.rng.choice(_VOWELS) for _ in range(syllables))

    def person(self):
        return self._fresh(lambda: self._word(3) + self.rng.choice(["", "n", "l", "r", "s", "k"]))

    def thing(self, kinds):
        return self._fresh(lambda: self._word(3) + "-" + self.rng.choice(kinds))


class Household:
    """A random household and its day. ``told`` maps every fact told (a tuple)
    to the value told last: the household's true state (closed world)."""

    def __init__(self, rng, namer, max_fact_len=4, rule=False):
        self.rng = rng
        self.rule = rule     # a move tells only the new place
        self.namer = namer
        self.gifts = max_fact_len >= 4
        self.people = [namer.person() for _ in range(rng.randint(2, 3))]
        self.places = [namer.thing([room]) for room in rng.sample(ROOMS, rng.randint(3, 4))]
        self.objects = [namer.thing(THINGS + SWITCHABLE) for _ in range(rng.randint(2, 3))]
        self.events = [namer.thing(HAPPENINGS) for _ in range(rng.randint(1, 2))]
        self.told = {}
        self.where = {}      # person -> place
        self.lies = {}       # object -> place, or None while someone has it
        self.holder = {}     # object -> person, or None
        self.on = {}         # switchable object -> bool, once told
        self.event_at = {}   # event -> place while it goes on, None once over
        self.gave = []       # (giver, object, taker)

    @staticmethod
    def switchable(obj):
        return obj.rsplit("-", 1)[1] in SWITCHABLE

    # ---- what happens --------------------------------------------------------

    def setup(self):
        """Where everyone and everything is at first: (instructions, story)."""
        out = []
        for p in self.people:
            self.where[p] = self.rng.choice(self.places)
            out.append(([((p, "location", self.where[p]), True)], "%s is in the %s" % (p, self.where[p])))
        for o in self.objects:
            self.lies[o], self.holder[o] = self.rng.choice(self.places), None
            out.append(([((o, "location", self.lies[o]), True)], "the %s is in the %s" % (o, self.lies[o])))
        return out

    def _options(self, busy):
        """Every happening possible now that involves no name in busy:
        (weight, instructions it tells, names involved, function applying it)."""
        rng, opts = self.rng, []
        for p in self.people:
            if p in busy:
                continue
            here = self.where[p]
            opts.append((4, 2, {p}, lambda p=p: self._move(
                p, rng.choice([x for x in self.places if x != self.where[p]]))))
            for o in self.objects:
                if o in busy:
                    continue
                if self.lies[o] == here:
                    opts.append((2, 2, {p, o}, lambda p=p, o=o: self._pick_up(p, o)))
                if self.holder[o] == p:
                    opts.append((2, 2, {p, o}, lambda p=p, o=o: self._put_down(p, o)))
                    for q in self.people:
                        if q != p and q not in busy and self.where[q] == here:
                            opts.append((2, 3 if self.gifts else 2, {p, o, q},
                                         lambda p=p, o=o, q=q: self._give(p, o, q)))
        for o in self.objects:
            if self.switchable(o) and o not in busy:
                opts.append((1, 1, {o}, lambda o=o: self._switch(o)))
        for e in self.events:
            if e in busy:
                continue
            if e not in self.event_at:
                opts.append((1, 1, {e}, lambda e=e: self._start(e, rng.choice(self.places))))
            elif self.event_at[e] is not None:
                opts.append((1, 1, {e}, lambda e=e: self._end(e)))
        return opts

    def _move(self, p, new):
        old, self.where[p] = self.where[p], new
        told = [((p, "location", new), True)]
        if not self.rule:
            told.insert(0, ((p, "location", old), False))
        return told, "%s goes from the %s to the %s" % (p, old, new)

    def _pick_up(self, p, o):
        place, self.lies[o], self.holder[o] = self.lies[o], None, p
        return [((o, "location", place), False), ((p, "has", o), True)], \
            "%s picks up the %s in the %s" % (p, o, place)

    def _put_down(self, p, o):
        place, self.lies[o], self.holder[o] = self.where[p], self.where[p], None
        return [((p, "has", o), False), ((o, "location", place), True)], \
            "%s puts the %s down in the %s" % (p, o, place)

    def _give(self, p, o, q):
        self.holder[o] = q
        instr = [((p, "has", o), False), ((q, "has", o), True)]
        if self.gifts:
            self.gave.append((p, o, q))
            instr.append(((p, "gave", o, q), True))
        return instr, "%s gives the %s to %s" % (p, o, q)

    def _switch(self, o):
        self.on[o] = not self.on.get(o, False)
        return [((o, "on"), self.on[o])], "the %s is switched %s" % (o, "on" if self.on[o] else "off")

    def _start(self, e, place):
        self.event_at[e] = place
        return [((e, "at", place), True)], "the %s starts in the %s" % (e, place)

    def _end(self, e):
        place, self.event_at[e] = self.event_at[e], None
        return [((e, "at", place), False)], "the %s in the %s is over" % (e, place)

    def day(self, steps):
        """The whole day, one list of (fact, value) and one story line per step:
        the setup packed MAX_INSTR instructions a step, then `steps` steps of one
        or two happenings each."""
        plan, instr, story = [], [], []
        for i, s in self.setup():
            if len(instr) + len(i) > MAX_INSTR:
                plan.append((instr, "; ".join(story)))
                instr, story = [], []
            instr += i
            story.append(s)
        if instr:
            plan.append((instr, "; ".join(story)))
        for _ in range(steps):
            instr, story, busy = [], [], set()
            for _ in range(2 if self.rng.random() < 0.4 else 1):
                opts = [o for o in self._options(busy) if len(instr) + o[1] <= MAX_INSTR]
                if not opts:
                    break
                _, _, names, happen = self.rng.choices(opts, weights=[o[0] for o in opts])[0]
                i, s = happen()
                busy |= names
                instr += i
                story.append(s)
            plan.append((instr, "; ".join(story)))
        for instr, _ in plan:
            for fact, value in instr:
                self.told[fact] = value
        return plan

    # ---- what is asked -------------------------------------------------------

    def questions(self):
        """[(fact, kind, truth)]: where everyone and everything is, who has
        what, what is on, where the events are, gifts, and names never told."""
        facts = []
        for p in self.people:
            facts += [(p, "location", pl) for pl in self.places]
        for o in self.objects:
            facts += [(o, "location", pl) for pl in self.places]
            facts += [(p, "has", o) for p in self.people]
            if self.switchable(o):
                facts.append((o, "on"))
        for e in self.events:
            facts += [(e, "at", pl) for pl in self.places]
        if self.gifts:
            for g, o, t in self.gave[-6:]:
                facts.append((g, "gave", o, t))
                others = [q for q in self.people if q not in (g, t)]
                facts.append((t, "gave", o, g) if not others else (g, "gave", o, self.rng.choice(others)))
        stranger, gadget = self.namer.person(), self.namer.thing(THINGS + SWITCHABLE)
        facts += [(stranger, "location", self.rng.choice(self.places)),
                  (self.rng.choice(self.people), "has", gadget), (gadget, "on")]
        seen, out = set(), []
        for f in facts:
            if f in seen:
                continue
            seen.add(f)
            if f[0] in self.where and f[1] == "location" and self.told.get(f) and self.where[f[0]] != f[2]:
                out.append((f, "left (rule)", False))  # told true, then a move elsewhere (--rule)
            elif f in self.told:
                out.append((f, "holds now" if self.told[f] else "told false", self.told[f]))
            else:
                out.append((f, "never told", False))
        return out[:MAX_QUERIES]


def _model_facts(client, model):
    """The model's longest fact, and a warning when it was never trained."""
    m = client.get_model(model)
    warn = None
    if m.get("origin") == "random" and m.get("version_note") == "created":
        warn = ("model %r has random parameters and was never trained: its answers mean nothing "
                "(GET /v1/models shows its origin)" % model)
    return m["config"]["max_fact_len"], m, warn


def play(client, model, household, steps, delay=0, label=False, out=None, verbose=False):
    """One household in a fresh session: tells its day, waits `delay` silent
    steps, asks, scores. Returns the household's result (a dict)."""
    def say(text):
        if out is not None:
            out.write(text + "\n")

    session = client.create_session(model)
    sid, step = session["id"], session["step"]
    plan = household.day(steps)
    for instr, story in plan:
        r = client.step(sid, instructions=[(list(f), v) for f, v in instr], expect_step=step)
        step = r["step"]
        if verbose:
            say("  step %d: %s" % (step, story))
    for _ in range(delay):
        step = client.step(sid, expect_step=step)["step"]
    asked = household.questions()
    r = client.step(sid, queries=[list(f) for f, _, _ in asked], expect_step=step)
    step = r["step"]
    answers = [a["p"] for a in r["answers"]]
    right = {k: [0, 0] for k in KINDS}
    wrong = []
    for (fact, kind, truth), p in zip(asked, answers):
        ok = (p >= 0.5) == truth
        right[kind][0] += ok
        right[kind][1] += 1
        if not ok:
            wrong.append({"fact": list(fact), "kind": kind, "truth": truth, "p": p})
    n_right = sum(v[0] for v in right.values())
    result = {
        "session": sid, "steps": step, "facts_told": len(household.told),
        "people": household.people, "places": household.places, "objects": household.objects,
        "events": household.events, "questions": len(asked), "right": n_right,
        "accuracy": n_right / len(asked),
        "always_no": sum(1 for _, _, t in asked if not t) / len(asked),  # the score of answering "no" to all
        "by_kind": {k: {"right": v[0], "asked": v[1]} for k, v in right.items()},
        "wrong": wrong, "model_version": r["model_version"],
    }
    p_of = {f: p for (f, _, _), p in zip(asked, answers)}
    for person in household.people:
        probs = [(p_of[(person, "location", pl)], pl) for pl in household.places]
        p, guess = max(probs)
        truly = household.where[person]
        say("  where is %s? %s (p=%.2f); truly the %s%s" % (
            person, "the " + guess if p >= 0.5 else "nowhere, it says", p, truly,
            "" if guess == truly and p >= 0.5 else "  <- wrong"))
    if verbose:
        for w in wrong:
            say("  wrong: %s: p=%.2f, truly %s (%s)" % (",".join(w["fact"]), w["p"],
                                                       "yes" if w["truth"] else "no", w["kind"]))
    if label:
        stored = client.label(sid, step, [t for _, _, t in asked])
        result["training_example"] = stored["training_example"]
    return result


def run(client, model="default", out=None, seed=None, runs=1, steps=8, delay=0, label=False,
        verbose=False, warn=None, rule=False, block=0):
    """Plays `runs` households (a fresh session each) drawn from `seed` (None:
    a random seed) and writes each one's accuracy and a summary to `out` (a
    text stream; None: nothing). `warn` (a function of a string; default: out)
    gets the warning about an untrained model. Returns {"seed", "model",
    "model_version", "model_origin", "untrained", "households": [one dict
    each: session, names, steps, facts_told, questions, right, accuracy,
    always_no, by_kind, wrong, training_example with --label], "summary",
    "blocks": [the summary of every `block` runs, when block > 0]}. `rule`:
    moves tell only the new place (see the module's doc)."""
    def say(text):
        if out is not None:
            out.write(text + "\n")

    if seed is None:
        seed = random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)
    namer = Namer(rng)
    max_len, m, untrained = _model_facts(client, model)
    if max_len < 3:
        raise ValueError("model %r takes facts of at most %d symbols; this example needs 3" % (model, max_len))
    if untrained:
        (warn or say)("warning: " + untrained)
    say("seed %d, model %s (version %d, origin %s)" % (seed, model, m["version"], m.get("origin", "?")))
    results, blocks = [], []
    for i in range(runs):
        h = Household(rng, namer, max_len, rule)
        say("household %d/%d: %s; %s; %s; %s"
            % (i + 1, runs, ", ".join(h.people), ", ".join(h.places), ", ".join(h.objects), ", ".join(h.events)))
        res = play(client, model, h, steps, delay, label, out, verbose)
        results.append(res)
        bk = res["by_kind"]
        say("  %d steps, %d facts told; %d/%d answers right (%.1f%%): %s%s" % (
            res["steps"], res["facts_told"], res["right"], res["questions"], 100 * res["accuracy"],
            ", ".join("%s %d/%d" % (k, bk[k]["right"], bk[k]["asked"]) for k in KINDS if bk[k]["asked"]),
            "; labelled (training example: %s)" % str(res["training_example"]).lower() if label else ""))
        if block and (i + 1) % block == 0:
            b = summarize(results[-block:])
            blocks.append(dict(b, runs=[i + 2 - block, i + 1]))
            say("block of runs %d-%d: %.1f%% right (%s)" % (i + 2 - block, i + 1, 100 * b["accuracy"], _kinds(b)))
    summary = summarize(results)
    say("summary: %d household%s, %d questions, %.1f%% right (%s); per household min %.1f%%, mean %.1f%%;"
        " answering \"no\" to everything would score %.1f%%" % (
            runs, "" if runs == 1 else "s", summary["questions"], 100 * summary["accuracy"], _kinds(summary),
            100 * summary["min_accuracy"], 100 * summary["mean_accuracy"], 100 * summary["always_no"]))
    return {"seed": seed, "model": model, "model_version": m["version"], "model_origin": m.get("origin"),
            "untrained": untrained is not None, "households": results, "summary": summary, "blocks": blocks}


def _kinds(summary):
    """The accuracy of each kind asked, as text."""
    return ", ".join("%s %.1f%%" % (k, 100 * summary["by_kind"][k]) for k in KINDS
                     if summary["by_kind"][k] is not None)


def summarize(results):
    """Totals over households: accuracy overall and by kind, min and mean per household."""
    asked = sum(r["questions"] for r in results)
    right = sum(r["right"] for r in results)
    by_kind = {}
    for k in KINDS:
        n = sum(r["by_kind"][k]["asked"] for r in results)
        by_kind[k] = sum(r["by_kind"][k]["right"] for r in results) / n if n else None
    accs = [r["accuracy"] for r in results]
    no = sum(r["always_no"] * r["questions"] for r in results)
    return {"households": len(results), "questions": asked, "right": right, "accuracy": right / asked,
            "always_no": no / asked,
            "by_kind": by_kind, "min_accuracy": min(accs), "mean_accuracy": sum(accs) / len(accs)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--key", default=None, help="API key (open mode needs none)")
    ap.add_argument("--model", default="default")
    ap.add_argument("--runs", type=int, default=1, help="households, a fresh session each (default 1)")
    ap.add_argument("--steps", type=int, default=8, help="steps of happenings after the setup (default 8)")
    ap.add_argument("--delay", type=int, default=0, help="silent steps before the questions (default 0)")
    ap.add_argument("--seed", type=int, default=None, help="draws the households (default: random, printed)")
    ap.add_argument("--label", action="store_true", help="send the true answers as labels (online learning)")
    ap.add_argument("--rule", action="store_true",
                    help="a move tells only the new place: the one-place rule is for the model to learn")
    ap.add_argument("--block", type=int, default=0, help="print the accuracy of every N runs (default: none)")
    ap.add_argument("--verbose", "-v", action="store_true", help="tell the story and list wrong answers")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    args = ap.parse_args(argv)
    for name, lo in (("runs", 1), ("steps", 0), ("delay", 0), ("block", 0)):
        if getattr(args, name) < lo:
            ap.error("--%s must be at least %d" % (name, lo))
    client = Client(args.url, api_key=args.key)
    try:
        res = run(client, args.model, None if args.json else sys.stdout, args.seed, args.runs, args.steps,
                  args.delay, args.label, args.verbose, warn=lambda w: sys.stderr.write("assistant: %s\n" % w),
                  rule=args.rule, block=args.block)
    except (WorldstateError, ValueError) as e:
        sys.stderr.write("assistant: %s\n" % e)
        return 1
    except KeyboardInterrupt:
        return 130
    if args.json:
        json.dump(res, sys.stdout)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
