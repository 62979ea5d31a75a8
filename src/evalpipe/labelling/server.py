"""The labelling page's web app: Flask (which MLflow already brings), on 127.0.0.1 only, every
request carrying the random token printed with the URL (a page another local user or site
cannot drive: no token, 403).

Routes: `/` the page; `GET /api/state` what to show; `POST /api/label` a verdict (saved
before the answer is sent: a 200 means it is on disk); `POST /api/undo`. A verdict that could
not be saved (a full disk) answers 507 with the one error line, and the page keeps the item.
"""

from __future__ import annotations

import secrets
from typing import Any

from evalpipe.labelling.page import PAGE
from evalpipe.labelling.session import Session
from evalpipe.safety.errors import EvalpipeError


def make_app(session: Session, token: str) -> Any:
    """The Flask app over one session; `token` must accompany every request."""
    # lazy: flask, ~180 ms
    from flask import Flask, jsonify, request

    app = Flask("evalpipe.labelling")

    @app.before_request
    def check_token() -> Any:
        given = request.args.get("token", "")
        if not secrets.compare_digest(given.encode(), token.encode()):
            return jsonify({"error": "missing or wrong token: open the URL evalpipe label printed"}), 403
        return None

    @app.get("/")
    def page() -> Any:
        return PAGE, 200, {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"}

    @app.get("/api/state")
    def state() -> Any:
        return jsonify(session.state())

    @app.post("/api/label")
    def label() -> Any:
        body = request.get_json(silent=True) or {}
        grade = body.get("grade")
        try:
            if grade is not None and (isinstance(grade, bool) or not isinstance(grade, int)):
                raise EvalpipeError(f"grade {grade!r}: give 0, 1 or 2 (or skip)")
            session.give(
                str(body.get("case_id", "")),
                str(body.get("candidate", "")),
                grade,
                float(body.get("seconds") or 0.0),
            )
        except EvalpipeError as exc:
            code = 507 if "cannot save" in str(exc) else 409
            return jsonify({"error": str(exc)}), code
        out = session.state()
        out["saved"] = "saved " + ("skip" if grade is None else f"grade {grade}")
        return jsonify(out)

    @app.post("/api/undo")
    def undo() -> Any:
        try:
            done = session.undo()
        except EvalpipeError as exc:
            return jsonify({"error": str(exc)}), 507
        out = session.state()
        out["saved"] = "undone" if done else "nothing to undo"
        return jsonify(out)

    return app
