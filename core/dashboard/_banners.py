"""The status banner after an action: a fixed table of messages keyed by the ``done`` code of
the page's URL. The URL never carries text: an unknown code, or a count that is not a small
integer, shows nothing."""

from __future__ import annotations

from collections.abc import Mapping

#: ``done`` code -> message; ``{moved}`` is the ``moved`` query parameter (an integer)
MESSAGES: Mapping[str, str] = {
    "paused": "Paused: its scheduled windows are excused until you resume it.",
    "resumed": "Resumed: its scheduled windows run again.",
    "not-paused": "The job was not paused: nothing to resume.",
    "resolved": "Resolved: the window is accounted for without a run.",
    "rerun": "Enqueued the window to run again (a new generation).",
    "redriven": "Redrove {moved} message(s).",
    "signed-in": "Signed in: actions are enabled for this session.",
    "signed-out": "Signed out.",
}

#: the ``done`` code of each window or job action's answer
ACTION_CODES: Mapping[str, str] = {"pause": "paused", "resolve": "resolved", "rerun": "rerun"}


def banner(query: Mapping[str, str], max_moved: int) -> str | None:
    """The message for ``query``'s ``done`` code, or None."""
    message = MESSAGES.get(query.get("done", ""))
    if message is None or "{moved}" not in message:
        return message
    moved = query.get("moved", "")
    if not (moved.isascii() and moved.isdigit() and int(moved) <= max_moved):
        return None
    return message.format(moved=int(moved))


def action_code(name: str, answer: Mapping[str, object]) -> str:
    """The ``done`` code of action ``name`` that answered ``answer``."""
    if name == "resume":
        return (
            "not-paused" if str(answer.get("text", "")).endswith(" was not paused") else "resumed"
        )
    return ACTION_CODES[name]
