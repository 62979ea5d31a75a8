"""A real HTTP server on 127.0.0.1 that speaks OpenAI chat completions and Anthropic messages.

Deterministic answers, so judge tests need no network and no model: a unit is
relevant iff its ID (read from the prompt's `ID:` line) contains `marker`. Unit IDs
can also ask for trouble: `flaky` answers 429 then 500 before succeeding, `slow`
sleeps past the client's timeout, `garbage` answers prose instead of JSON, `broken`
answers 500, and `denied` answers 401. Every request is recorded for the tests to
inspect.

Whole-server misbehaviour, for the run-level tests: `hang="questions"` answers the
probe (a prompt without an `ID:` line) but never a question, `hang="all"` answers
nothing (until the server is closed); `deny_all` answers 401 to everything, the model
`missing` 404; `question_status=N` answers the probe but every question with HTTP N
(500: as `broken`); `echo_key` puts the credentials it received (the API key and
Authorization headers) into every error message and every reason, as careless servers do.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JudgeServer:
    def __init__(
        self,
        marker: str = "merge",
        slow_seconds: float = 2.0,
        flaky_failures: int = 2,
        hang: str = "",
        deny_all: bool = False,
        question_status: int = 0,
        echo_key: bool = False,
    ):
        self.marker = marker
        self.slow_seconds = slow_seconds
        self.flaky_failures = flaky_failures
        self.hang = hang
        self.deny_all = deny_all
        self.question_status = question_status
        self.echo_key = echo_key
        self.released = threading.Event()  # set on close: hung handlers return
        self.requests: list[dict[str, Any]] = []  # {"path", "body", "headers"} of every request
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                with server._lock:
                    server.requests.append(
                        {
                            "path": self.path,
                            "body": body,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                        }
                    )
                status, payload = server.answer(self.path, body, server.requests[-1]["headers"])
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    if status == 429 or status >= 500:
                        self.send_header("retry-after-ms", "5")  # keep the client's backoff short
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> JudgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def calls(self, path_suffix: str = "") -> int:
        return sum(r["path"].endswith(path_suffix) for r in self.requests)

    @staticmethod
    def prompt_of(body: dict[str, Any]) -> str:
        return "\n".join(
            m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in body["messages"]
            if m["role"] == "user"
        )

    def questions(self) -> int:
        """Requests that asked about a unit (not the probe)."""
        return sum(bool(re.search(r"^ID: ", self.prompt_of(r["body"]), re.MULTILINE)) for r in self.requests)

    def answer(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        prompt = self.prompt_of(body)
        found = re.search(r"^ID: (.*)$", prompt, re.MULTILINE)
        unit_id = found.group(1).strip() if found else ""
        creds = " ".join(headers.get(h, "") for h in ("authorization", "x-api-key", "api-key"))
        echo = f" (you sent {creds.strip()})" if self.echo_key else ""
        if self.hang == "all" or (self.hang == "questions" and found):
            self.released.wait()
            return 503, {"error": {"message": "shutting down", "type": "overloaded"}}
        if body.get("model") == "missing":
            return 404, {
                "error": {"message": "The model `missing` does not exist", "type": "not_found_error"}
            }
        if "denied" in unit_id or self.deny_all:
            return 401, {"error": {"message": "invalid api key" + echo, "type": "authentication_error"}}
        if "broken" in unit_id or (found and self.question_status):
            if self.question_status and self.question_status != 500:
                status = self.question_status
                return status, {"error": {"message": f"refused{echo}", "type": "invalid_request_error"}}
            return 500, {"error": {"message": "internal error" + echo, "type": "api_error"}}
        if "flaky" in unit_id:
            with self._lock:
                seen = self._failures.get(unit_id, 0)
                self._failures[unit_id] = seen + 1
            if seen < self.flaky_failures:
                return (429 if seen == 0 else 500), {"error": {"message": "try again", "type": "overloaded"}}
        if "slow" in unit_id:
            time.sleep(self.slow_seconds)
        if "garbage" in unit_id:
            text = "I think this one is probably fine."
        else:
            relevant = self.marker in unit_id
            reason = f"the unit {'does' if relevant else 'does not'} contain {self.marker}{echo}"
            text = "```json\n" + json.dumps({"relevant": relevant, "reason": reason}) + "\n```"
        tokens_in, tokens_out = len(prompt.split()), len(text.split())
        if path.endswith("/chat/completions"):
            return 200, {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": tokens_in,
                    "completion_tokens": tokens_out,
                    "total_tokens": tokens_in + tokens_out,
                },
            }
        if path.endswith("/messages"):
            return 200, {
                "id": "msg_test",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
            }
        return 404, {"error": {"message": f"no route {path}", "type": "not_found"}}
