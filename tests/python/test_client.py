#!/usr/bin/env python3
"""The Python client (clients/python/worldstate.py) against a live daemon
($WS_DAEMON, started on a free loopback port with a temporary data directory):
every route, the typed errors, the retry rules (a lost step reply recovered from
the log through expect_step, a lost reply without expect_step not repeated, a
503 "not applied" retried, an unreachable daemon), API keys, and the house
assistant example. Run by CTest (test_python_client); needs only python3."""

import contextlib
import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))

import example_assistant  # noqa: E402
import worldstate as ws  # noqa: E402

DAEMON = os.environ.get("WS_DAEMON", "worldstated")
SMALL = {"d": 32, "n_heads": 2, "n_state": 8, "n_upd_layers": 1, "n_ext_layers": 1, "max_fact_len": 3,
         "vocab_cap": 64, "n_overflow": 4, "d_raw": 3}


class Daemon:
    """worldstated on dir, listening on 127.0.0.1:0 (the port comes from its
    startup line); ``daemon``: the program, ``extra``: more flags."""

    def __init__(self, data_dir, daemon=DAEMON, extra=()):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen([daemon, "--data-dir", data_dir, "--listen", "127.0.0.1:0", "--backend", "cpu",
                                      "--threads", "2", *extra], stdout=subprocess.PIPE, env=env)
        deadline = time.time() + 60  # the first start creates the default model
        line = b""
        while time.time() < deadline and b"\n" not in line:
            ready, _, _ = select.select([self.proc.stdout], [], [], 1.0)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                line += chunk
        marker = b"listening on http://127.0.0.1:"
        if marker not in line:
            self.proc.kill()
            raise RuntimeError("daemon did not start: %r" % line)
        port = int(line.split(marker)[1].split(b" ")[0])
        self.url = "http://127.0.0.1:%d" % port

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=60)
        self.proc.stdout.close()
        return rc


class LosesFirstReply(ws.Client):
    """Sends the first request matching (method, path suffix) for real, then
    behaves as if its reply was lost."""

    def __init__(self, url, method, suffix, **kw):
        super().__init__(url, **kw)
        self.method, self.suffix, self.armed = method, suffix, True

    def _attempt(self, method, path, body):
        answer = super()._attempt(method, path, body)
        if self.armed and method == self.method and path.endswith(self.suffix):
            self.armed = False
            raise ws._Lost("reply lost (test)")
        return answer


class BusyFirst(ws.Client):
    """Answers the first attempt with 503 overloaded without sending it."""

    busy = True

    def _attempt(self, method, path, body):
        if self.busy:
            self.busy = False
            return 503, {}, b'{"error":{"code":"overloaded","message":"queue full (test)"}}'
        return super()._attempt(method, path, body)


class OpenMode(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ws-pytest-")
        cls.d = Daemon(cls.dir)
        cls.c = ws.Client(cls.d.url, retries=2, backoff=0.01)
        cls.c.create_model("small", config=SMALL, training={"enabled": False}, seed=5)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0
        shutil.rmtree(cls.dir)

    def test_backup_off(self):  # test_server_backup takes backups; here the route is off
        self.assertIsNone(self.c.backup_status())
        with self.assertRaises(ws.Conflict) as e:
            self.c.start_backup("nightly")
        self.assertEqual((e.exception.status, e.exception.code), (409, "backup_not_configured"))

    def test_probes(self):
        self.assertEqual(self.c.health(), {"status": "ok"})
        self.assertEqual(self.c.ready()["status"], "ready")
        self.assertIn("worldstate_steps_total", self.c.metrics())
        v = self.c.version()
        self.assertEqual(v["version"], ws.__version__)  # one release: daemon and client
        self.assertEqual(v["backend"], "cpu")

    def test_models(self):
        names = [m["name"] for m in self.c.list_models()]
        self.assertIn("small", names)
        self.assertIn("default", names)
        m = self.c.get_model("small")
        self.assertEqual(m["version"], 1)
        self.assertEqual(m["config"]["d"], 32)
        self.assertEqual(m["status"]["serving_version"], 1)
        with self.assertRaises(ws.Conflict) as e:
            self.c.create_model("small")
        self.assertEqual((e.exception.status, e.exception.code), (409, "conflict"))
        with self.assertRaises(ws.BadRequest) as e:
            self.c.create_model("bad name!")
        self.assertEqual(e.exception.code, "invalid_request")
        t = self.c.set_training("small", enabled=False, lr=0.002, recall_queries=2)
        self.assertEqual((t["enabled"], t["lr"], t["recall_queries"]), (False, 0.002, 2))
        with self.assertRaises(ws.BadRequest):
            self.c.set_training("small", lr=5)
        with self.assertRaises(ws.NotFound):
            self.c.get_model("nope")
        version, data = self.c.get_checkpoint("small")
        self.assertEqual(version, 1)
        header_len = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + header_len])
        self.assertEqual(header["__metadata__"]["format"], "worldstate-model-1")

    def test_import_model(self):
        c = self.c
        self.assertIn(c.get_model("default")["origin"], ("random", "shipped"))
        version, data = c.get_checkpoint("small")
        m = c.import_model("small-copy", data)
        self.assertEqual((m["created"], m["version"], m["origin"]), (True, 1, "imported"))
        self.assertEqual(m["config"], c.get_model("small")["config"])
        # The copy answers as the original: same parameters, same vocabulary.
        step = dict(instructions=[(["imp", "kitchen"], True)],
                    queries=[["imp", "kitchen"], ["imp", "attic"]])
        a = c.step(c.create_session("small")["id"], **step)["answers"]
        b = c.step(c.create_session("small-copy")["id"], **step)["answers"]
        for x, y in zip(a, b):
            self.assertAlmostEqual(x["p"], y["p"], places=6)
        # From a file, onto the existing model: its next version.
        path = os.path.join(self.dir, "small.safetensors")
        with open(path, "wb") as f:
            f.write(data)
        m = c.import_model("small-copy", path)
        self.assertEqual((m["created"], m["version"], m["version_note"]), (False, 2, "imported"))
        # Refused imports change no model. "default" is left out: earlier tests stepped
        # it with labels, and its online training may publish a version meanwhile.
        def models():
            return [m for m in c.list_models() if m["name"] != "default"]
        before = models()
        with self.assertRaises(ws.BadRequest) as e:
            c.import_model("other", b"not a checkpoint")
        self.assertEqual((e.exception.status, e.exception.code), (400, "bad_checkpoint"))
        with self.assertRaises(ws.Conflict) as e:
            c.import_model("default", data)
        self.assertEqual((e.exception.status, e.exception.code), (409, "config_mismatch"))
        with self.assertRaises(ws.BadRequest) as e:
            c.import_model("bad name!", data)
        self.assertEqual(e.exception.code, "invalid_request")
        self.assertEqual(models(), before)
        self.assertIn("default", [m["name"] for m in c.list_models()])
        # For a tenant (open mode: "default"): its own model; shared ones stay shared.
        m = c.import_model("small-own", data, tenant="default")
        self.assertEqual((m["created"], m["tenant"]), (True, "default"))
        self.assertIsNone(c.get_model("small-copy")["tenant"])
        with self.assertRaises(ws.Conflict):
            c.import_model("small-copy", data, tenant="default")
        m = c.create_model("small-own2", config={"d": 16, "n_heads": 2, "n_state": 4},
                           tenant="default")
        self.assertEqual(m["tenant"], "default")
        # Back to version 1 and forth to 2: a rollback (admin; open mode is).
        self.assertEqual([v["version"] for v in c.list_versions("small-copy")], [1, 2])
        self.assertEqual(c.rollback_model("small-copy", 1)["version"], 1)
        self.assertTrue(c.list_versions("small-copy")[0]["current"])
        with self.assertRaises(ws.NotFound):
            c.rollback_model("small-copy", 7)
        self.assertEqual(c.rollback_model("small-copy", 2)["version"], 2)
        t = c.set_training("small-copy", gate=False, holdout=0.25)
        self.assertEqual((t["gate"], t["holdout"], t["self_supervised"]), (False, 0.25, True))
        # Delete: a model no session uses goes; "default" stays.
        c.delete_model("small-own2")
        with self.assertRaises(ws.NotFound):
            c.get_model("small-own2")
        with self.assertRaises(ws.Conflict) as e:
            c.delete_model("default")
        self.assertEqual(e.exception.code, "model_is_default")

    def test_steps_queries_labels_state(self):
        c = self.c
        s = c.create_session("small")
        sid = s["id"]
        self.assertEqual((s["model"], s["step"]), ("small", 0))
        r = c.step(sid, instructions=[(["mary", "location", "kitchen"], True), ([0.5, -1.25, 2.0], False)],
                   queries=[["mary", "location", "kitchen"], {"fact": ["john", "garden"]}], labels=[True, False],
                   expect_step=0)
        self.assertEqual(r["step"], 1)
        self.assertEqual(len(r["answers"]), 2)
        self.assertTrue(0 <= r["answers"][0]["p"] <= 1)
        self.assertEqual(r["model_version"], 1)
        with self.assertRaises(ws.StepConflict) as e:
            c.step(sid, instructions=[(["a", "b"], True)], expect_step=0)
        self.assertEqual((e.exception.status, e.exception.current_step), (409, 1))
        with self.assertRaises(ws.BadRequest) as e:
            c.step(sid, queries=[["a", "b"]], labels=[True, False])  # one label too many
        self.assertEqual(e.exception.code, "invalid_request")
        with self.assertRaises(ws.BadRequest):
            c.step(sid, instructions=[([1.0, 2.0], True)])  # the model's vectors have 3 numbers
        with self.assertRaises(ValueError):
            c.step(sid, queries=[["a", 1]])  # neither symbols nor numbers: nothing is sent
        q = c.query(sid, [["mary", "location", "kitchen"]])
        self.assertEqual((q["step"], len(q["answers"])), (1, 1))
        log = c.list_steps(sid)
        self.assertEqual(len(log["steps"]), 1)
        self.assertIsNone(log["next_after"])
        entry = log["steps"][0]
        self.assertEqual(entry["labels"], [True, False])
        self.assertEqual(entry["instructions"][1], {"vector": [0.5, -1.25, 2.0], "value": False})
        with self.assertRaises(ws.Conflict) as e:
            c.label(sid, 1, [False, False])
        self.assertEqual(e.exception.code, "labels_conflict")
        self.assertTrue(c.label(sid, 1, [False, False], replace=True)["stored"])
        with self.assertRaises(ws.NotFound):
            c.label(sid, 7, [True])
        for t in range(1, 4):
            c.step(sid, instructions=[(["e%d" % t, "p"], True)], expect_step=t)
        self.assertEqual([e["step"] for e in c.iter_steps(sid, limit=2)], [1, 2, 3, 4])
        st = c.get_state(sid)
        self.assertEqual((st.step, st.shape, len(st.data)), (4, (8, 32), 8 * 32 * 4))
        floats = st.floats()
        self.assertEqual(len(floats), 256)
        self.assertTrue(all(abs(x) < 100 for x in floats))
        self.assertEqual(c.get_session(sid)["step"], 4)

    def test_sessions(self):
        c = self.c
        ids = [c.create_session("small")["id"] for _ in range(3)]
        listed = [s["id"] for s in c.iter_sessions(limit=1)]
        for i in ids:
            self.assertIn(i, listed)
        page = c.list_sessions(limit=1)
        self.assertEqual(len(page["sessions"]), 1)
        self.assertIsNotNone(page["next_after"])
        self.assertEqual(c.get_state(ids[0]).data, b"")
        c.delete_session(ids[0])
        with self.assertRaises(ws.NotFound) as e:
            c.get_session(ids[0])
        self.assertEqual((e.exception.status, e.exception.code), (404, "not_found"))
        with self.assertRaises(ws.NotFound) as e:
            c.create_session("nope")
        self.assertEqual(e.exception.code, "model_not_found")

    def test_lost_step_reply_is_recovered(self):
        sid = self.c.create_session("small")["id"]
        lossy = LosesFirstReply(self.d.url, "POST", "/steps", retries=2, backoff=0.01)
        r = lossy.step(sid, instructions=[(["x", "y"], True)], queries=[["x", "y"]], labels=[True], expect_step=0)
        self.assertTrue(r.get("recovered"))
        self.assertEqual(r["step"], 1)
        logged = self.c.list_steps(sid)["steps"]
        self.assertEqual(len(logged), 1)  # applied once, not twice
        self.assertEqual(r["answers"], logged[0]["answers"])
        # Without expect_step a lost reply is not repeated: the step may have been applied.
        lossy = LosesFirstReply(self.d.url, "POST", "/steps", retries=2, backoff=0.01)
        with self.assertRaises(ws.TransportError) as e:
            lossy.step(sid, instructions=[(["x", "y"], False)])
        self.assertTrue(e.exception.sent)
        self.assertEqual(self.c.get_session(sid)["step"], 2)
        # Another step in the slot (not ours): the 409 stays the caller's.
        lossy = LosesFirstReply(self.d.url, "POST", "/steps", retries=2, backoff=0.01)
        lossy.armed = False
        with self.assertRaises(ws.StepConflict):
            lossy.step(sid, instructions=[(["x", "y"], True)], expect_step=1)

    def test_lost_reply_recovered_with_inferred(self):
        """A step whose log holds instructions a learned rule added (marked
        inferred) is still recognised as the one sent."""
        c = self.c
        c.create_model("ruled", config=SMALL, training={"enabled": False, "rules": True}, seed=5)
        sid = c.create_session("ruled")["id"]
        for p in range(8):  # eight people's moves, the old place labelled false
            c.step(sid, instructions=[(["p%d" % p, "location", "kitchen"], True)])
            c.step(sid, instructions=[(["p%d" % p, "location", "garden"], True)],
                   queries=[["p%d" % p, "location", "kitchen"]], labels=[False])
        self.assertTrue(any(r["holds"] for r in c.get_model("ruled")["rules"]))
        at = c.step(sid, instructions=[(["x", "location", "kitchen"], True)])["step"]
        lossy = LosesFirstReply(self.d.url, "POST", "/steps", retries=2, backoff=0.01)
        r = lossy.step(sid, instructions=[(["x", "location", "garden"], True)], expect_step=at)
        self.assertTrue(r.get("recovered"))
        logged = c.list_steps(sid, after=at)["steps"][0]["instructions"]
        self.assertEqual(logged[1], {"fact": ["x", "location", "kitchen"], "value": False,
                                     "inferred": True})

    def test_retries_not_applied_and_unreachable(self):
        busy = BusyFirst(self.d.url, retries=1, backoff=0.01)
        self.assertEqual(busy.health(), {"status": "ok"})
        busy = BusyFirst(self.d.url, retries=0)
        with self.assertRaises(ws.Unavailable) as e:
            busy.health()
        self.assertEqual((e.exception.status, e.exception.code), (503, "overloaded"))
        gone = ws.Client("http://127.0.0.1:9", retries=1, backoff=0.01, timeout=2)  # discard port: refused
        with self.assertRaises(ws.TransportError) as e:
            gone.health()
        self.assertFalse(e.exception.sent)

    def test_house_assistant_example(self):
        # Two random households (fresh sessions, names no model has seen), scored
        # against their true state; the default model may be untrained here, so
        # only the bookkeeping is checked, not the accuracy.
        out = io.StringIO()
        res = example_assistant.run(self.c, "default", out, seed=7, runs=2, steps=5, delay=2, label=True)
        text = out.getvalue()
        self.assertIn("seed 7", text)
        self.assertIn("where is %s?" % res["households"][0]["people"][0], text)
        self.assertIn("summary: 2 households", text)
        first, second = res["households"]
        names = lambda h: set(h["people"] + h["places"] + h["objects"] + h["events"])  # noqa: E731
        self.assertFalse(names(first) & names(second))
        for h in res["households"]:
            self.assertTrue(0 <= h["accuracy"] <= 1)
            self.assertEqual(sum(k["asked"] for k in h["by_kind"].values()), h["questions"])
            self.assertEqual(sum(k["right"] for k in h["by_kind"].values()), h["right"])
            self.assertGreater(h["by_kind"]["holds now"]["asked"], 0)
            self.assertGreater(h["by_kind"]["never told"]["asked"], 0)
            self.assertEqual(self.c.get_session(h["session"])["step"], h["steps"])
            self.assertIn("training_example", h)
            last = self.c.list_steps(h["session"], after=h["steps"] - 1)["steps"][0]
            self.assertEqual(len(last["labels"]), h["questions"])  # the true answers, as labels
            self.assertEqual(last["instructions"], [])
        # The same seed draws the same households.
        again = example_assistant.run(self.c, "default", None, seed=7, runs=2, steps=5, delay=2)
        self.assertEqual([h["people"] for h in again["households"]], [h["people"] for h in res["households"]])
        # --rule: a move tells only the new place, and the places left are
        # asked as a kind of their own; --block: a summary every N runs.
        ruled = example_assistant.run(self.c, "default", None, seed=7, runs=2, steps=5, rule=True, block=1)
        self.assertEqual([b["runs"] for b in ruled["blocks"]], [[1, 1], [2, 2]])
        self.assertGreater(sum(h["by_kind"]["left (rule)"]["asked"] for h in ruled["households"]), 0)
        for h in ruled["households"]:
            for s in self.c.iter_steps(h["session"]):
                for i in s["instructions"]:
                    self.assertFalse(i["fact"][0] in h["people"] and i["fact"][1] == "location"
                                     and not i["value"])
        # The command line: JSON out, errors as exit codes.
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(example_assistant.main(["--url", self.d.url, "--runs", "1", "--steps", "2", "--json"]), 0)
        doc = json.loads(buf.getvalue())
        self.assertEqual((doc["summary"]["households"], doc["model"]), (1, "default"))
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(example_assistant.main(["--url", self.d.url, "--model", "nope"]), 1)
            self.assertEqual(example_assistant.main(["--url", "http://127.0.0.1:9", "--seed", "1"]), 1)
            with self.assertRaises(SystemExit) as e:
                example_assistant.main(["--runs", "0"])
            self.assertEqual(e.exception.code, 2)


class Keys(unittest.TestCase):
    def test_keys_and_tenants(self):
        tmp = tempfile.mkdtemp(prefix="ws-pytest-keys-")

        def key(tenant, admin):
            argv = [DAEMON, "key", "create", "--create", "--tenant", tenant, "--data-dir", tmp] + (["--admin"] if admin else [])
            return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()

        admin, acme, evil = key("ops", True), key("acme", False), key("evil", False)
        d = Daemon(tmp)
        try:
            with self.assertRaises(ws.Unauthorized) as e:
                ws.Client(d.url).list_sessions()
            self.assertEqual((e.exception.status, e.exception.code), (401, "unauthorized"))
            self.assertEqual(ws.Client(d.url).health(), {"status": "ok"})  # probes need no key
            with self.assertRaises(ws.Forbidden):
                ws.Client(d.url, api_key=acme).create_model("m2")
            with self.assertRaises(ws.Forbidden):  # refused before the body is read
                ws.Client(d.url, api_key=acme).import_model("m3", b"\0" * 4096)
            self.assertEqual(ws.Client(d.url, api_key=admin).create_model("m2")["version"], 1)
            sid = ws.Client(d.url, api_key=acme).create_session()["id"]
            with self.assertRaises(ws.NotFound):  # another tenant's session looks missing
                ws.Client(d.url, api_key=evil).get_session(sid)
            self.assertEqual(ws.Client(d.url, api_key=acme).get_session(sid)["id"], sid)
        finally:
            self.assertEqual(d.stop(), 0)
        shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main(verbosity=2)
