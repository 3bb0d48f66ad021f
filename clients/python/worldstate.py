"""worldstate — a Python client of the worldstated REST API (../../api.md).

One module, standard library only (urllib, json). One method per route:

    from worldstate import Client, StepConflict

    c = Client("http://127.0.0.1:8080", api_key=None, timeout=30)
    s = c.create_session()                                  # model "default"
    r = c.step(s["id"], expect_step=0,
               instructions=[(["mary", "kitchen"], True)],   # (fact, value)
               queries=[["mary", "kitchen"], ["john", "garden"]],
               labels=[True, False])
    r["answers"][0]["p"]                                     # 0.93

Facts are lists of symbols (``["mary", "kitchen"]``), lists of numbers (a raw
vector, for models with d_raw > 0), or the API's own objects (``{"fact": [...]}``,
``{"vector": [...]}``). Instructions are ``(fact, value)`` pairs or objects with
``"value"``.

Errors raise WorldstateError subclasses carrying ``status`` (HTTP status, 0 when
no answer came), ``code`` (the API's error code) and ``message``:
BadRequest, Unauthorized, Forbidden, NotFound, MethodNotAllowed, Conflict
(StepConflict with ``current_step``), TooLarge, ServerError, Unavailable,
TransportError and ProtocolError.

Retries (``retries`` times, ``backoff`` seconds doubling up to 10 s) happen only
where repeating cannot apply anything twice, as the C client does
(../README.md, Retries): a request that never reached the server, and a 503
whose code says "not applied", are retried on every route; a request whose reply
was lost is retried for GET, DELETE, PUT labels, PATCH training, POST queries,
and POST steps that carry ``expect_step``. Creating a session or a model is
never repeated once sent. When a step's reply was lost and the retry answers
409 step_conflict with ``current_step == expect_step + 1``, the first attempt
was applied: the client reads that step back from the log, and if it is the
step it sent, returns its logged answers with ``"recovered": True``. Importing
a model (``import_model``) is never repeated once sent either.

The client talks to the URL directly (environment proxies are ignored). A
Client holds only its configuration; calls from several threads are fine.
"""

import http.client
import json
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from array import array

# The worldstate release this client comes with (CMake project() VERSION; the
# daemon serves its own at GET /version; test_python_client checks they agree).
__version__ = "0.1.0"

__all__ = [
    "Client", "State", "WorldstateError", "BadRequest", "Unauthorized", "Forbidden",
    "NotFound", "MethodNotAllowed", "Conflict", "StepConflict", "TooLarge", "ServerError",
    "Unavailable", "TransportError", "ProtocolError",
]


class WorldstateError(Exception):
    """An error of the API or of the connection to it."""

    def __init__(self, status, code, message, body=None):
        super().__init__("[%s, %s] %s" % (code, status, message))
        self.status = status
        self.code = code
        self.message = message
        self.body = body


class BadRequest(WorldstateError):
    """400: bad_json or invalid_request; nothing was changed."""


class Unauthorized(WorldstateError):
    """401: missing, malformed, unknown or revoked key."""


class Forbidden(WorldstateError):
    """403: an admin route with a non-admin key."""


class NotFound(WorldstateError):
    """404: no such route, session (or another tenant's), step or model."""


class MethodNotAllowed(WorldstateError):
    """405."""


class Conflict(WorldstateError):
    """409: labels_conflict, conflict (name taken), session_limit."""


class StepConflict(Conflict):
    """409 step_conflict: the session is at ``current_step``, not at expect_step."""

    def __init__(self, status, code, message, body=None):
        super().__init__(status, code, message, body)
        self.current_step = (body or {}).get("current_step")


class TooLarge(WorldstateError):
    """413: the body is over 1 MiB."""


class ServerError(WorldstateError):
    """500 (or another unexpected status)."""


class Unavailable(WorldstateError):
    """503: overloaded, deadline_exceeded, shutting_down, storage_busy: not applied."""


class TransportError(WorldstateError):
    """No answer. ``sent`` tells whether the request may have reached the server."""

    def __init__(self, message, sent):
        super().__init__(0, "transport", message)
        self.sent = sent


class ProtocolError(WorldstateError):
    """An answer this client does not understand."""


_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound,
              405: MethodNotAllowed, 409: Conflict, 413: TooLarge, 503: Unavailable}
_NOT_APPLIED = {"overloaded", "deadline_exceeded", "shutting_down", "storage_busy"}


def _error(status, data):
    """The exception for an error answer."""
    try:
        body = json.loads(data.decode("utf-8"))
        err = body["error"]
        code, message = err["code"], err["message"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return ProtocolError(status, "protocol", "HTTP %d without an error object" % status)
    cls = StepConflict if code == "step_conflict" else _BY_STATUS.get(status, ServerError)
    return cls(status, code, message, body)


class State:
    """A session's world state W_t: ``step``, ``shape`` (T, d) and the raw
    little-endian float32 bytes ``data``; ``floats()`` gives them as an array."""

    def __init__(self, step, shape, data):
        self.step, self.shape, self.data = step, shape, data

    def floats(self):
        a = array("f")
        a.frombytes(self.data)
        if sys.byteorder == "big":
            a.byteswap()
        return a


def _fact(f):
    """A fact as the API spells it."""
    if isinstance(f, dict):
        return {k: f[k] for k in ("fact", "vector") if k in f}
    items = list(f)
    if items and all(isinstance(x, str) for x in items):
        return {"fact": items}
    if items and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items):
        return {"vector": [float(x) for x in items]}
    raise ValueError("a fact is a list of symbols or a list of numbers: %r" % (f,))


def _instruction(i):
    if isinstance(i, dict):
        if not isinstance(i.get("value"), bool):
            raise ValueError("an instruction needs \"value\": true or false: %r" % (i,))
        return dict(_fact(i), value=i["value"])
    f, value = i
    return dict(_fact(f), value=bool(value))


class _Lost(Exception):
    """An attempt whose request may have reached the server, without a reply."""


class _NotSent(Exception):
    """An attempt that never reached the server."""


class Client:
    """A worldstated client: ``url`` of the daemon, ``api_key`` (sent as
    ``Authorization: Bearer``), ``timeout`` per attempt in seconds, ``retries``
    and the first ``backoff`` in seconds (see the module's doc)."""

    def __init__(self, url="http://127.0.0.1:8080", api_key=None, timeout=30.0, retries=3,
                 backoff=0.1):
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    # ---- transport ---------------------------------------------------------

    def _attempt(self, method, path, body):
        """One HTTP exchange: (status, headers, bytes)."""
        headers = {"Accept": "application/json"}
        data = None
        if isinstance(body, (bytes, bytearray)):  # a checkpoint (import_model)
            data = bytes(body)
            headers["Content-Type"] = "application/octet-stream"
        elif body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.headers, e.read()
        except urllib.error.URLError as e:
            if isinstance(e.reason, (ConnectionRefusedError, socket.gaierror)):
                raise _NotSent(str(e.reason)) from e
            raise _Lost(str(e.reason)) from e
        except (http.client.HTTPException, ConnectionError, TimeoutError, socket.timeout) as e:
            raise _Lost(str(e) or type(e).__name__) from e

    def _request(self, method, path, body=None, repeatable=True, lost=None, accept=()):
        """The answer to a request, retried as the module's doc says; raises on an
        error status other than those in ``accept``. ``lost`` (a list) gets True
        appended when an attempt's reply was lost and a later attempt answered."""
        wait = self.backoff
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                status, headers, data = self._attempt(method, path, body)
            except _NotSent as e:
                if last:
                    raise TransportError("cannot reach %s: %s" % (self.url, e), sent=False) from None
            except _Lost as e:
                if last or not repeatable:
                    raise TransportError("no reply from %s: %s" % (self.url, e), sent=True) from None
                if lost is not None:
                    lost.append(True)
            else:
                if status < 400 or status in accept:
                    return status, headers, data
                err = _error(status, data)
                if last or not (isinstance(err, Unavailable) and err.code in _NOT_APPLIED):
                    raise err
            time.sleep(wait)
            wait = min(wait * 2, 10.0)
        raise AssertionError("unreachable")

    def _json(self, method, path, body=None, repeatable=True, lost=None, accept=()):
        status, _, data = self._request(method, path, body, repeatable, lost, accept)
        if status == 204:
            return None
        try:
            return json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise ProtocolError(status, "protocol", "the answer is not JSON") from None

    @staticmethod
    def _q(part):
        return urllib.parse.quote(str(part), safe="")

    def _session(self, session_id, suffix=""):
        return "/v1/sessions/" + self._q(session_id) + suffix

    # ---- probes ------------------------------------------------------------

    def health(self):
        """GET /healthz: {"status": "ok"}."""
        return self._json("GET", "/healthz")

    def ready(self):
        """GET /readyz: {"status": "ready", ...}, or {"status": "not_ready",
        "reason": ...} when the daemon answers 503 (not an error here)."""
        return self._json("GET", "/readyz", accept=(503,))

    def metrics(self):
        """GET /metrics: the Prometheus text."""
        return self._request("GET", "/metrics")[2].decode("utf-8")

    def version(self):
        """GET /version: {"version": ..., "git": ..., "backend": "cpu"|"cuda"}."""
        return self._json("GET", "/version")

    # ---- sessions ----------------------------------------------------------

    def create_session(self, model=None):
        """POST /v1/sessions: the new session (id, model, step 0, ...)."""
        return self._json("POST", "/v1/sessions", {} if model is None else {"model": model},
                          repeatable=False)

    def list_sessions(self, after=None, limit=None):
        """GET /v1/sessions: one page, {"sessions": [...], "next_after": id|None}."""
        q = {k: v for k, v in (("after", after), ("limit", limit)) if v is not None}
        return self._json("GET", "/v1/sessions" + ("?" + urllib.parse.urlencode(q) if q else ""))

    def iter_sessions(self, limit=100):
        """Every session of the tenant, page after page."""
        after = None
        while True:
            page = self.list_sessions(after, limit)
            yield from page["sessions"]
            after = page["next_after"]
            if after is None:
                return

    def get_session(self, session_id):
        """GET /v1/sessions/{id}."""
        return self._json("GET", self._session(session_id))

    def delete_session(self, session_id):
        """DELETE /v1/sessions/{id}. A 404 on a retry after a lost reply counts as deleted."""
        lost = []
        try:
            self._json("DELETE", self._session(session_id), lost=lost)
        except NotFound:
            if not lost:
                raise

    def get_state(self, session_id):
        """GET /v1/sessions/{id}/state: a State (empty data before the first step)."""
        _, headers, data = self._request("GET", self._session(session_id, "/state"))
        try:
            shape = tuple(int(x) for x in headers.get("X-State-Shape", "0,0").split(","))
            return State(int(headers.get("X-Step", "0")), shape, data)
        except ValueError:
            raise ProtocolError(200, "protocol", "bad X-State-Shape or X-Step header") from None

    # ---- steps, queries, labels --------------------------------------------

    def step(self, session_id, instructions=(), queries=(), labels=None, expect_step=None):
        """POST /v1/sessions/{id}/steps: {"step", "answers", "model_version"}
        (and "recovered": True when a lost reply was read back from the log)."""
        body = {"instructions": [_instruction(i) for i in instructions],
                "queries": [_fact(q) for q in queries]}
        if labels is not None:
            body["labels"] = [bool(x) for x in labels]
        if expect_step is not None:
            body["expect_step"] = int(expect_step)
        lost = []
        try:
            return self._json("POST", self._session(session_id, "/steps"), body,
                              repeatable=expect_step is not None, lost=lost)
        except StepConflict as e:
            if not lost or e.current_step != body.get("expect_step", -2) + 1:
                raise
            logged = self.list_steps(session_id, after=expect_step, limit=1)["steps"]
            if not logged or not self._same_step(logged[0], body):
                raise
            return {"step": logged[0]["step"], "answers": logged[0]["answers"],
                    "model_version": logged[0]["model_version"], "recovered": True}

    @staticmethod
    def _same_step(logged, sent):
        # instructions a learned rule added (marked "inferred") are the server's
        told = [i for i in logged["instructions"] if not i.get("inferred")]
        return (told == sent["instructions"] and logged["queries"] == sent["queries"]
                and logged["labels"] == sent.get("labels"))

    def query(self, session_id, queries):
        """POST /v1/sessions/{id}/queries: answers on the current state, which stays."""
        return self._json("POST", self._session(session_id, "/queries"),
                          {"queries": [_fact(q) for q in queries]})

    def list_steps(self, session_id, after=None, limit=None):
        """GET /v1/sessions/{id}/steps: one page of the step log, oldest first."""
        q = {k: v for k, v in (("after", after), ("limit", limit)) if v is not None}
        return self._json("GET", self._session(session_id, "/steps")
                          + ("?" + urllib.parse.urlencode(q) if q else ""))

    def iter_steps(self, session_id, after=0, limit=100):
        """The step log from step after+1 on, page after page."""
        while True:
            page = self.list_steps(session_id, after, limit)
            yield from page["steps"]
            after = page["next_after"]
            if after is None:
                return

    def label(self, session_id, step, labels, replace=False):
        """PUT /v1/sessions/{id}/steps/{n}/labels: {"step", "stored", "training_example"}."""
        body = {"labels": [bool(x) for x in labels]}
        if replace:
            body["replace"] = True
        return self._json("PUT", self._session(session_id, "/steps/%d/labels" % int(step)), body)

    # ---- models ------------------------------------------------------------

    def list_models(self):
        """GET /v1/models: the models this key may use (shared ones and its
        tenant's own; an admin key: all). Each has "tenant": its tenant, or
        None when shared."""
        return self._json("GET", "/v1/models")["models"]

    def create_model(self, name, config=None, training=None, seed=None, tenant=None):
        """POST /v1/models (admin): {"name", "version": 1, "config", "training",
        "tenant"}. ``tenant``: the tenant the model is for (only its sessions use
        and train it); None: a model shared by every tenant."""
        body = {"name": name}
        for k, v in (("config", config), ("training", training), ("seed", seed),
                     ("tenant", tenant)):
            if v is not None:
                body[k] = v
        return self._json("POST", "/v1/models", body, repeatable=False)

    def get_model(self, name):
        """GET /v1/models/{name}: the model with its live "status"."""
        return self._json("GET", "/v1/models/" + self._q(name))

    def set_training(self, name, enabled=None, lr=None, update_every=None, recall_queries=None,
                     **more):
        """PATCH /v1/models/{name}/training (admin): the resulting settings. ``more``
        takes the other settings by their API names (self_supervised,
        negative_queries, holdout, gate, gate_tolerance, rehearsal, scope, publish_every,
        rules: api.md)."""
        body = {k: v for k, v in (("enabled", enabled), ("lr", lr), ("update_every", update_every),
                                  ("recall_queries", recall_queries)) if v is not None}
        body.update({k: v for k, v in more.items() if v is not None})
        return self._json("PATCH", "/v1/models/%s/training" % self._q(name), body)

    def list_versions(self, name):
        """GET /v1/models/{name}/versions: the recorded versions, oldest first."""
        return self._json("GET", "/v1/models/%s/versions" % self._q(name))["versions"]

    def rollback_model(self, name, version):
        """POST /v1/models/{name}/versions/{version}/current (admin): makes an
        earlier version current again; the model as ``list_models`` shows it."""
        return self._json("POST", "/v1/models/%s/versions/%d/current" % (self._q(name), int(version)))

    def delete_model(self, name):
        """DELETE /v1/models/{name} (admin): the model, its versions and files.
        Refused (Conflict) for "default" and for a model that sessions use.
        A 404 on a retry after a lost reply counts as deleted."""
        lost = []
        try:
            self._json("DELETE", "/v1/models/%s" % self._q(name), lost=lost)
        except NotFound:
            if not lost:
                raise

    def import_model(self, name, path_or_bytes, tenant=None):
        """POST /v1/models/{name}/import (admin): a checkpoint (safetensors,
        worldstate-model-1; a file path or its bytes) becomes model ``name``
        (``tenant``'s own, or shared when None), or its next version when the
        model exists (it keeps its tenant). Returns the model as
        ``list_models`` shows it, plus ``"created"``: True when a new model was
        made (201), False for a new version (200). Never repeated once sent."""
        if isinstance(path_or_bytes, (bytes, bytearray)):
            data = bytes(path_or_bytes)
        else:
            with open(path_or_bytes, "rb") as f:
                data = f.read()
        path = "/v1/models/%s/import" % self._q(name)
        if tenant is not None:
            path += "?tenant=" + self._q(tenant)
        status, _, raw = self._request("POST", path, data, repeatable=False)
        try:
            model = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise ProtocolError(status, "protocol", "the answer is not JSON") from None
        model["created"] = status == 201
        return model

    def get_checkpoint(self, name):
        """GET /v1/models/{name}/checkpoint (admin): (version, safetensors bytes)."""
        _, headers, data = self._request("GET", "/v1/models/%s/checkpoint" % self._q(name))
        try:
            return int(headers.get("X-Model-Version", "")), data
        except ValueError:
            raise ProtocolError(200, "protocol", "bad X-Model-Version header") from None

    # ---- admin -------------------------------------------------------------

    def start_backup(self, name=None):
        """POST /v1/admin/backup (admin): starts an online backup of the data
        directory into <--backup-dir>/<name> (``name``: 1 to 64 of [A-Za-z0-9._-],
        not starting with '.'; None: one from the clock) and returns its state,
        "running" (``backup_status`` follows it). Never repeated once sent."""
        body = {"name": name} if name is not None else None
        return self._json("POST", "/v1/admin/backup", body, repeatable=False)["backup"]

    def backup_status(self):
        """GET /v1/admin/backup (admin): the latest backup's state ({"name",
        "path", "state": "running"|"done"|"failed", "files", "bytes", ...}), or
        None before the first."""
        return self._json("GET", "/v1/admin/backup")["backup"]
