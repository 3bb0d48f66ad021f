#!/usr/bin/env python3
"""A house assistant on worldstated: it tells the service where people and
things are as the day goes on, asks where they are now, and — since it knows
the truth — labels the answers, so that the service learns online.

    python3 clients/python/example_assistant.py [--url URL] [--key KEY] [--model NAME]

Each event of the day is one step: instructions say which facts now hold (or no
longer hold), queries ask about every place the people could be, and the labels
sent later (PUT .../labels) are the true answers. An untrained model answers
near chance; what it learns shows in the "training_example" flag and, over many
days, in the answers.
"""

import argparse
import sys

from worldstate import Client, WorldstateError

PEOPLE = ["mary", "john"]
PLACES = ["kitchen", "garden", "office"]

# The day: who moves where (each event moves one person), and a lamp switched.
EVENTS = [
    {"mary": "kitchen", "john": "garden"},
    {"mary": "office"},
    {"john": "kitchen"},
    {"mary": "garden"},
]


def run(client, model, out):
    """Plays the day in a new session; returns the fraction of people located
    right (argmax over places)."""
    session = client.create_session(model)
    sid, step = session["id"], session["step"]
    where = {}
    located = asked = 0
    for event in EVENTS:
        instructions = []
        for person, place in event.items():
            if person in where:  # the old place no longer holds
                instructions.append(([person, "location", where[person]], False))
            instructions.append(([person, "location", place], True))
            where[person] = place
        queries = [[p, "location", q] for p in PEOPLE if p in where for q in PLACES]
        answer = client.step(sid, instructions=instructions, queries=queries, expect_step=step)
        step = answer["step"]
        truth = [where[q[0]] == q[2] for q in queries]
        for i, person in enumerate(p for p in PEOPLE if p in where):
            probs = [a["p"] for a in answer["answers"][i * len(PLACES):(i + 1) * len(PLACES)]]
            guess = PLACES[probs.index(max(probs))]
            located += guess == where[person]
            asked += 1
            out.write("step %d: where is %s? the service says %s (p=%.2f), truly %s\n"
                      % (step, person, guess, max(probs), where[person]))
        labelled = client.label(sid, step, truth)
        out.write("  labels stored; training example: %s\n" % labelled["training_example"])
    state = client.get_state(sid)
    out.write("session %s: %d steps, state %dx%d, model version %d\n"
              % (sid, state.step, state.shape[0], state.shape[1], answer["model_version"]))
    return located / asked


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--key", default=None, help="API key (open mode needs none)")
    ap.add_argument("--model", default="default")
    args = ap.parse_args(argv)
    client = Client(args.url, api_key=args.key)
    try:
        share = run(client, args.model, sys.stdout)
    except WorldstateError as e:
        sys.stderr.write("assistant: %s\n" % e)
        return 1
    print("located %.0f%% of the people right" % (100 * share))
    return 0


if __name__ == "__main__":
    sys.exit(main())
