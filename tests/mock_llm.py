"""Local mock model servers for tests: OpenAI Chat Completions and Anthropic Messages.

Stdlib only. Each server listens on 127.0.0.1 on a free port, answers every
request with a valid public goods reply (``{"reason": ..., "coins": n}``, the
coins derived from a hash of the request's messages, so the same request always
gets the same reply) and realistic ``usage``, and records every request.

Faults are injected with a *script*: a list of behaviours consumed one per
request (``ok`` once it runs out), or a function ``(count, body) -> behaviour``
called for every request (``count`` starts at 1). A behaviour is one of

    "ok"                   a valid reply
    "429" / "429:0.3"      rate limited, with ``Retry-After`` (seconds; default 0)
    "500"                  internal server error
    "529"                  Anthropic's "overloaded" (with its JSON error body)
    "401"                  bad API key (the error quotes the key presented, as some servers do)
    "400"                  bad request
    "slow" / "slow:3"      sleep that many seconds (default ``slow_seconds``) before answering
    "drop"                 close the connection without any response
    "malformed"            HTTP 200 with a body that is not JSON
    "garbage"              a valid API response whose text is not a valid game reply
    "flood" / "flood:N"    ignores max_tokens: a reply of N characters (default 2,000,000), a game reply
                           whose reason runs on, streamed in chunks without a length, as a server that
                           streams sends it; "flood:N:sized" announces its Content-Length first
    "flood_error:N"        a 400 whose error message runs on to N characters (default 2,000,000)
    "broken_off"           HTTP 200 announcing a whole answer, then the connection closed halfway through it
    "hang"                 accept the request and never answer it (until the server stops)
    "empty" / "null"       HTTP 200, a well-formed answer whose text is "" / null (Anthropic: an empty
                           text block / no content block at all)
    "nochoices"            HTTP 200 with no message at all (OpenAI: ``choices: []``; Anthropic: no content)
    "nonjson"              HTTP 200 with an HTML page, as a proxy in front of a dead server sends
    "gate:NAME"            wait until the test calls ``open_gate("NAME")``, then answer as "ok"

``responder`` replaces the public goods reply: a function ``(body) -> str | dict`` given the
request body as the server received it, so a test plays any game the way a model would,
from the text it was sent and nothing else (a dict is sent as JSON, or as the forced tool's
input on the Anthropic API). Like Anthropic's API, the Anthropic mock answers 400 to a request
with a message whose text is empty or blank (the closing assistant message excepted).

Listing the models (the key check before a run) is answered at once, outside the script, as most
live servers answer it while their model is busy; ``hung=True`` makes it hang too, as a server that
accepts connections and answers nothing does. A backend's probe is a chat request like any other
(``is_probe`` tells it apart), so the script decides its fate too. ``keys={...}``: the only API keys the server
takes; any other gets a 401 to every request, the model listing included.

``one_at_a_time=True`` serves chat requests as llama_cpp.server does: one generates at a time and
the rest queue, each generating for ``generate_seconds`` (a probe, ``is_probe``, for none) whether
or not its client still waits, and the model listing is not answered while anything generates.
``wait_until(check, timeout)`` waits for ``check(mock)`` to hold, looked at after every request the
server receives or answers: tests wait for the server's own events, not for time.

``echo_key=True`` makes every error message quote the API key the client
presented (as some servers do with part of it), to test that errors are
redacted before they are shown or stored.

Use as a context manager (``with OpenAIMock() as mock: ...``) or call
``start()`` and ``stop()``; ``stop`` never waits for a slow handler. A stopped server is
gone as a killed one is: new connections are refused, and a request on a connection kept
alive from before is dropped unanswered. ``start(port)`` brings it back on the same port.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Behaviour = str
Script = Iterable[Behaviour] | Callable[[int, Any], Behaviour]


@dataclass
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: Any  # parsed JSON, or None
    behaviour: Behaviour
    at: float = field(default_factory=time.monotonic)
    reply: str | None = None  # the reply text sent back, when the request was answered
    sent: int | None = None  # bytes of a flooded body that left before the client hung up (None: not flooded)

    @property
    def messages(self) -> list[dict]:
        return (self.body or {}).get("messages") or []

    @property
    def text(self) -> str:
        """Everything the model was sent, as one text (see ``body_text``)."""
        return body_text(self.body)

    @property
    def is_probe(self) -> bool:
        return is_probe(self.body)

    @property
    def api_key(self) -> str | None:
        """The key the client presented: ``Authorization: Bearer ...`` or ``x-api-key`` (older Anthropic SDKs)."""
        auth = self.headers.get("authorization", "")
        return auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else self.headers.get("x-api-key")


def body_text(body: Any) -> str:
    """What a model reads in one request: the system prompt, then every message's text, in order.
    Both APIs are read alike (Anthropic's content may be a list of blocks)."""
    body = body or {}
    parts = []
    system = body.get("system")
    if isinstance(system, list):
        system = "\n\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    if system:
        parts.append(system)
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            content = "\n\n".join(b.get("text", "") for b in content if isinstance(b, dict))
        parts.append(content or "")
    return "\n\n".join(parts)


def is_probe(body: Any) -> bool:
    """A backend's probe: one user message, a reply of a few tokens (a turn's call asks for far more)."""
    body = body or {}
    messages = body.get("messages") or []
    most = body.get("max_tokens") or body.get("max_completion_tokens") or 0
    return len(messages) == 1 and messages[0].get("role") == "user" and 0 < most <= 8 and not body.get("system")


def coins_for(messages: Any, endowment: int) -> int:
    """The mock's deterministic choice: a hash of the messages, from 0 to the endowment."""
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).digest()
    return int.from_bytes(digest[:4], "big") % (endowment + 1)


def _endowment(messages: Any) -> int:
    text = json.dumps(messages)
    found = re.findall(r"<0 to (\d+)>", text)
    return int(found[-1]) if found else 10


def _tokens(value: Any) -> int:
    return max(1, len(json.dumps(value)) // 4)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True


class MockServer:
    """Shared machinery; subclasses speak one API."""

    routes: dict[tuple[str, str], str] = {}

    def __init__(self, script: Script | None = None, *, slow_seconds: float = 3.0, model: str = "mock-model",
                 echo_key: bool = False, responder: Callable[[Any], str | dict] | None = None, hung: bool = False,
                 keys: set[str] | None = None, one_at_a_time: bool = False, generate_seconds: float = 0.0):
        self.one_at_a_time = one_at_a_time
        self.generate_seconds = generate_seconds
        self.generating = threading.Lock()  # held by the request that generates, with one_at_a_time
        self._idle = threading.Condition()
        self.busy = 0  # chat requests generating or queued to, with one_at_a_time
        self._gates: dict[str, threading.Event] = {}
        self._gates_lock = threading.Lock()
        self._changed = threading.Condition()
        self.responder = responder
        self.hung = hung
        self.keys = keys
        self.slow_seconds = slow_seconds
        self.echo_key = echo_key
        self.model = model
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.set_script(script)

    # -- control -------------------------------------------------------------------
    def set_script(self, script: Script | None) -> None:
        with self._lock:
            if callable(script):
                self._script_fn, self._script = script, []
            else:
                self._script_fn, self._script = None, list(script or [])

    def reset(self, script: Script | None = None) -> None:
        """Forget the recorded requests and start a new script."""
        self.set_script(script)
        with self._lock:
            self.requests.clear()

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def paths(self) -> list[str]:
        with self._lock:
            return [r.path for r in self.requests]

    def bodies(self, path: str | None = None) -> list[Any]:
        with self._lock:
            return [r.body for r in self.requests if path is None or r.path == path]

    def probes(self) -> list[Recorded]:
        """The requests that were a backend's probe (``is_probe``)."""
        with self._lock:
            return [r for r in self.requests if r.is_probe]

    def turns(self) -> list[Recorded]:
        """The requests that were not probes: the calls of the game's turns."""
        with self._lock:
            return [r for r in self.requests if not r.is_probe]

    def gate(self, name: str) -> threading.Event:
        with self._gates_lock:  # not the request lock: a script opens gates while that is held
            return self._gates.setdefault(name, threading.Event())

    def open_gate(self, name: str) -> None:
        self.gate(name).set()

    def changed(self) -> None:
        """Wake whoever waits in ``wait_until``: a request came or was answered."""
        with self._changed:
            self._changed.notify_all()

    def wait_until(self, check: Callable[["MockServer"], bool], timeout: float = 60.0) -> bool:
        """Whether ``check(self)`` came to hold before ``timeout`` (a bound for a test that fails, not a pace)."""
        end = time.monotonic() + timeout
        with self._changed:
            while not check(self):
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
        return True

    def answered(self) -> list[Recorded]:
        """The requests that got a reply (HTTP 200 with a parsable message)."""
        with self._lock:
            return [r for r in self.requests if r.reply is not None]

    @property
    def port(self) -> int:
        assert self._server is not None, "start the server first"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, port: int = 0) -> "MockServer":
        mock = self
        stopping = self._stopping = threading.Event()  # this run of the server's own: a restart does not revive old handlers

        class Handler(_Handler):
            server_mock = mock
            server_stopping = stopping

        self._server = _Server(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"{type(self).__name__}:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes slow handlers
        with self._gates_lock:
            gates = list(self._gates.values())
        for gate in gates:  # and gated ones, which then drop their connection
            gate.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "MockServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- one request ---------------------------------------------------------------
    def _next_behaviour(self, body: Any, recorded: Recorded) -> Behaviour:
        with self._lock:
            self.requests.append(recorded)
            count = len(self.requests)
            if self._script_fn is not None:
                behaviour = self._script_fn(count, body) or "ok"
            else:
                behaviour = self._script.pop(0) if self._script else "ok"
            recorded.behaviour = behaviour
        self.changed()
        return behaviour

    def answer(self, route: str, body: Any, handler: "_Handler", garbage: bool = False) -> tuple[int, dict[str, str], Any, str]:
        """(status, headers, payload, reply text)."""
        raise NotImplementedError

    def reply_for(self, messages: Any, garbage: bool = False, body: Any = None) -> dict[str, Any] | str:
        if garbage:
            return "I think I will put in a few coins, maybe."
        if self.responder is not None:
            return self.responder(body)
        coins = coins_for(messages, _endowment(messages))
        return {"reason": f"mock reply {coins}", "coins": coins}

    def _error_message(self, message: str, handler: "_Handler") -> str:
        return f"{message} (key presented: {_presented_key(handler)})" if self.echo_key else message

    def error(self, status: int, headers: dict[str, str], handler: "_Handler") -> tuple[int, dict[str, str], Any]:
        raise NotImplementedError

    def emptied(self, payload: Any, kind: str) -> Any:
        """``payload``, an answer, with no text ("empty", "null") or no message ("nochoices")."""
        raise NotImplementedError


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_mock: MockServer
    server_stopping: threading.Event

    def log_message(self, format, *args):  # quiet
        pass

    def _handle(self) -> None:
        mock = self.server_mock
        if self.server_stopping.is_set():  # the server is gone: the client sees its connection dropped
            self._drop()
            return
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        route = mock.routes.get((self.command, path))
        if route is None:
            self._send(404, {}, {"error": {"message": f"no route {self.command} {path}", "type": "not_found"}})
            return
        if mock.keys is not None and _presented_key(self) not in mock.keys:
            status, extra, payload = mock.error(401, {}, self)
            self._send(status, extra, payload)
            return
        if route == "models":  # listing models is not a model call: no script, no record
            if mock.hung:
                self.server_stopping.wait()
                self._drop()
                return
            if mock.one_at_a_time:  # not while a request generates or waits to, as llama_cpp.server
                with mock._idle:
                    while mock.busy and not self.server_stopping.is_set():
                        mock._idle.wait(0.5)
            self._send(200, {}, {"object": "list", "data": [
                {"id": mock.model, "object": "model", "created": 1700000000, "owned_by": "mock"}]})
            return
        recorded = Recorded(self.command, path, headers, body, "ok")
        behaviour = mock._next_behaviour(body, recorded)
        kind, _, arg = str(behaviour).partition(":")
        try:
            self._behave(mock, route, body, recorded, kind, arg)
        finally:
            mock.changed()

    def _behave(self, mock: MockServer, route: str, body: Any, recorded: Recorded, kind: str, arg: str) -> None:
        if kind == "drop":
            self._drop()
            return
        if kind == "hang":  # accepted, never answered: the client sees nothing until the server stops
            self.server_stopping.wait()
            self._drop()
            return
        if kind == "gate":
            mock.gate(arg).wait()
            if self.server_stopping.is_set():
                self._drop()
                return
            kind = "ok"
        if mock.one_at_a_time:  # one generation at a time; a client that gave up does not stop it
            with mock._idle:
                mock.busy += 1
            try:
                with mock.generating:
                    if not is_probe(body) and self.server_stopping.wait(mock.generate_seconds):
                        self._drop()
                        return
            finally:
                with mock._idle:
                    mock.busy -= 1
                    mock._idle.notify_all()
        if kind == "nonjson":
            self._send_raw(200, {"Content-Type": "text/html"}, b"<html><body><h1>502 Bad Gateway</h1></body></html>")
            return
        if kind in ("empty", "null", "nochoices"):
            status, extra, payload, text = mock.answer(route, body, self)
            self._send(status, extra, mock.emptied(payload, kind))
            return
        late = kind == "slow"
        if late:  # the answer comes after the client's timeout: not counted as answered
            if self.server_stopping.wait(float(arg) if arg else mock.slow_seconds):
                self._drop()  # stopped meanwhile: a killed server never answers
                return
            kind = "ok"
        if kind == "malformed":
            self._send_raw(200, {"Content-Type": "application/json"}, b'{"id": "chatcmpl-broken", "choices": [{"mess')
            return
        if kind == "flood":
            size, _, sized = arg.partition(":")
            status, extra, payload, text = mock.answer(route, body, self)
            data = json.dumps(mock.flooded(payload, text, int(size or 2_000_000))).encode()
            recorded.sent = self._stream(status, {"Content-Type": "application/json", **extra}, data, sized == "sized")
            return
        if kind in ("ok", "garbage"):
            status, extra, payload, text = mock.answer(route, body, self, garbage=kind == "garbage")
            if not late:
                recorded.reply = text
            self._send(status, extra, payload)
            return
        if kind == "broken_off":
            status, extra, payload, text = mock.answer(route, body, self)
            data = json.dumps(payload).encode()
            self._stream(status, {"Content-Type": "application/json", **extra}, data[: len(data) // 2], True,
                         announced=len(data))
            self._drop()
            return
        if kind == "flood_error":
            status, extra, payload = mock.error(400, {}, self)
            payload["error"]["message"] = _flood_text(int(arg or 2_000_000))
            self._send(status, extra, payload)
            return
        extra = {}
        if kind == "429":
            extra["Retry-After"] = arg or "0"
        status, extra, payload = mock.error(int(kind), extra, self)
        self._send(status, extra, payload)

    def handle_one_request(self) -> None:
        super().handle_one_request()
        if self.server_stopping.is_set():  # a stopped server answers nothing more on connections kept alive
            self.close_connection = True

    do_GET = do_POST = _handle

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send(self, status: int, headers: dict[str, str], payload: Any) -> None:
        self._send_raw(status, {"Content-Type": "application/json", **headers}, json.dumps(payload).encode())

    def _send_raw(self, status: int, headers: dict[str, str], data: bytes) -> None:
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client gave up (a slow answer after its timeout)
            self.close_connection = True


    def _stream(self, status: int, headers: dict[str, str], data: bytes, sized: bool, chunk: int = 64 * 1024,
                announced: int | None = None) -> int:
        """Send ``data`` in chunks as they come (chunked transfer, or after a Content-Length when
        ``sized``: ``announced``, else the data's length); returns how many bytes of it left before
        the client hung up."""
        sent = 0
        self.close_connection = True  # one flood per connection: a client that stops reading leaves it unusable
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            length = str(len(data) if announced is None else announced)
            self.send_header("Content-Length" if sized else "Transfer-Encoding", length if sized else "chunked")
            self.end_headers()
            for start in range(0, len(data), chunk):
                piece = data[start:start + chunk]
                self.wfile.write(piece if sized else b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
                sent += len(piece)
            if not sized:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except OSError:  # the client stopped reading and closed: what it wanted
            pass
        return sent


def _flood_text(length: int) -> str:
    """Prose that runs on to ``length`` characters."""
    words = "I weigh what the others gave last round against what the pot returns to each of us. "
    return (words * (length // len(words) + 1))[:length]


def _flooded_reply(text: str, length: int) -> dict:
    """A game reply (the mock's own, when it is a JSON object) whose reason runs on to ``length`` characters."""
    try:
        reply = json.loads(text)
    except ValueError:
        reply = None
    reply = reply if isinstance(reply, dict) else {}
    return {**reply, "reason": _flood_text(length)}


def _presented_key(handler: _Handler) -> str:
    auth = handler.headers.get("authorization") or ""
    return auth.removeprefix("Bearer ").strip() or handler.headers.get("x-api-key") or ""


class OpenAIMock(MockServer):
    """``POST /v1/chat/completions`` and ``GET /v1/models``."""

    routes = {("POST", "/v1/chat/completions"): "chat", ("GET", "/v1/models"): "models"}

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def answer(self, route, body, handler, garbage=False):
        messages = (body or {}).get("messages") or []
        reply = self.reply_for(messages, garbage, body)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        prompt_tokens, completion_tokens = _tokens(messages), _tokens(text)
        return 200, {"x-request-id": f"req_{uuid.uuid4().hex[:12]}"}, {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": (body or {}).get("model") or self.model,
            "system_fingerprint": "fp_mock",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }, text

    def flooded(self, payload, text, length):
        """The answer with its reply run on to ``length`` characters (a game reply's reason made long)."""
        payload["choices"][0]["message"]["content"] = json.dumps(_flooded_reply(text, length))
        return payload

    def error(self, status, headers, handler):
        kinds = {
            400: ("invalid_request_error", "Invalid request: this mock refuses the request.", None),
            401: ("invalid_request_error", f"Incorrect API key provided: {_presented_key(handler)}.", "invalid_api_key"),
            429: ("requests", "Rate limit reached for requests.", "rate_limit_exceeded"),
            500: ("server_error", "The server had an error while processing your request.", None),
            529: ("server_error", "Overloaded.", None),
        }
        kind, message, code = kinds.get(status, ("server_error", f"error {status}", None))
        message = self._error_message(message, handler)
        return status, headers, {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def emptied(self, payload, kind):
        if kind == "nochoices":
            return {**payload, "choices": []}
        message = {**payload["choices"][0]["message"], "content": "" if kind == "empty" else None}
        return {**payload, "choices": [{**payload["choices"][0], "message": message}]}


class AnthropicMock(MockServer):
    """``POST /v1/messages`` (the SDK's base URL is the server's root)."""

    routes = {("POST", "/v1/messages"): "messages", ("GET", "/v1/models"): "models"}

    @property
    def base_url(self) -> str:
        return self.url

    def answer(self, route, body, handler, garbage=False):
        body = body or {}
        messages = body.get("messages") or []
        blank = _blank_message(messages)
        if blank is not None:  # as Anthropic's API does: a 400 to a message without text
            return 400, {}, {"type": "error", "error": {"type": "invalid_request_error", "message":
                             f"messages.{blank}: all messages must have non-empty content except for the optional "
                             "final assistant message"}}, None
        reply = self.reply_for(messages, garbage, body)
        tools = body.get("tools") or []
        forced = (body.get("tool_choice") or {}).get("name") or (tools[0]["name"] if tools else None)
        if forced and not isinstance(reply, str):
            content = [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": forced, "input": reply}]
            stop_reason = "tool_use"
        else:
            content = [{"type": "text", "text": reply if isinstance(reply, str) else json.dumps(reply)}]
            stop_reason = "end_turn"
        text = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        input_tokens = _tokens([body.get("system"), messages, tools])
        return 200, {"request-id": f"req_{uuid.uuid4().hex[:24]}"}, {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": _tokens(reply),
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        }, text

    def flooded(self, payload, text, length):
        """The answer with its reply run on to ``length`` characters: the tool's input, or the text."""
        block = payload["content"][0]
        reply = _flooded_reply(text, length)
        if block["type"] == "tool_use":
            block["input"] = reply
        else:
            block["text"] = json.dumps(reply)
        return payload

    def error(self, status, headers, handler):
        kinds = {
            400: ("invalid_request_error", "messages: this mock refuses the request"),
            401: ("authentication_error", f"invalid x-api-key: {_presented_key(handler)}"),
            429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
            500: ("api_error", "Internal server error"),
            529: ("overloaded_error", "Overloaded"),
        }
        kind, message = kinds.get(status, ("api_error", f"error {status}"))
        message = self._error_message(message, handler)
        headers = {**headers, "request-id": f"req_{uuid.uuid4().hex[:24]}"}
        if status != 429:
            headers.setdefault("x-should-retry", "true" if status >= 500 else "false")
        return status, headers, {"type": "error", "error": {"type": kind, "message": message}}

    def emptied(self, payload, kind):
        if kind == "empty":
            return {**payload, "content": [{"type": "text", "text": ""}], "stop_reason": "end_turn"}
        return {**payload, "content": [] if kind == "null" else None, "stop_reason": "end_turn"}


def _blank_message(messages: list) -> int | None:
    """The index of the first message, other than a closing assistant one, whose text is empty or blank."""
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            content = "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text") \
                or any(isinstance(b, dict) and b.get("type") != "text" for b in content)
        last_assistant = index == len(messages) - 1 and isinstance(message, dict) and message.get("role") == "assistant"
        if not last_assistant and not (content.strip() if isinstance(content, str) else content):
            return index
    return None


class OllamaMock(MockServer):
    """Ollama's own API, ``POST /api/chat`` (not stream), as docs/examples/ollama_chat.py speaks it:
    the reply in ``message.content``, its token counts as ``prompt_eval_count`` and ``eval_count``,
    and errors as ``{"error": "..."}``."""

    routes = {("POST", "/api/chat"): "chat", ("GET", "/api/tags"): "models"}

    @property
    def base_url(self) -> str:
        return self.url

    def answer(self, route, body, handler, garbage=False):
        messages = (body or {}).get("messages") or []
        reply = self.reply_for(messages, garbage, body)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return 200, {}, {"model": (body or {}).get("model") or self.model, "created_at": "2026-01-01T00:00:00Z",
                         "message": {"role": "assistant", "content": text}, "done": True, "done_reason": "stop",
                         "prompt_eval_count": _tokens(messages), "eval_count": _tokens(text)}, text

    def flooded(self, payload, text, length):
        payload["message"]["content"] = json.dumps(_flooded_reply(text, length))
        return payload

    def error(self, status, headers, handler):
        messages = {400: "invalid request: this mock refuses it", 401: "unauthorized", 404: "model not found",
                    429: "too many requests", 500: "the model runner stopped"}
        return status, headers, {"error": self._error_message(messages.get(status, f"error {status}"), handler)}

    def emptied(self, payload, kind):
        if kind == "nochoices":
            return {k: v for k, v in payload.items() if k != "message"}
        return {**payload, "message": {"role": "assistant", "content": "" if kind == "empty" else None}}
