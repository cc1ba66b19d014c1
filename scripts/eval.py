#!/usr/bin/env python3
"""The agent eval: scenarios against the running stack, judged through the
entities API, never from the model's words. Run through scripts/eval.sh.

Each run of a scenario uses a new user (so runs share no data), sets up what
it needs through the entities API, sends one chat turn to the stream
function, then checks the user's ontology (or, for reads, the stream's own
tool events against ids the API gave). Per run it records: success, turns
(chat turns sent), tool calls, and latency from sending the turn: first event
from the model (text or tool call), first tool call, and ``done``.

Output: one line per run, then a Markdown table per scenario (runs, passed,
pass^k — all k runs of the scenario passed, as τ-bench reports it — and
median latencies) on stdout; ``--json FILE`` keeps every run.
"""

from __future__ import annotations

import argparse
import datetime
import http.server
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field
from zoneinfo import ZoneInfo
from typing import Any, Callable, Dict, List, Optional


@dataclass
class Run:
    scenario: str
    ok: bool = False
    why: str = ""
    turns: int = 0
    tool_calls: List[str] = field(default_factory=list)
    first_event_s: Optional[float] = None
    first_tool_s: Optional[float] = None
    done_s: Optional[float] = None
    done_reason: str = ""
    error: str = ""


class Stack:
    def __init__(self, base: str, cli: str):
        self.base, self.cli = base.rstrip("/"), cli

    def token(self, user: str) -> str:
        return subprocess.run([self.cli, "token", "--sub", user, "--ttl-secs", "7200"], check=True,
                              capture_output=True, text=True).stdout.strip()

    def call(self, token: str, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"authorization": f"Bearer {token}", "content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{method} {path}: HTTP {e.code} {e.read().decode()[:300]}") from None
        return json.loads(text) if text else None


class User:
    """One eval user: a token, the entities API and the stream."""

    def __init__(self, stack: Stack, name: str):
        self.stack, self.token = stack, stack.token(name)

    def api(self, method: str, path: str, body: Any = None) -> Any:
        return self.stack.call(self.token, method, "/lambda-url/entities" + path, body)

    def project(self, name: str) -> Dict[str, Any]:
        return self.api("POST", "/projects", {"name": name})["data"]["project"]

    def create(self, pid: str, kind: str, body: Dict[str, Any]) -> str:
        return self.api("POST", f"/projects/{pid}/{kind}s", body)["data"]["id"]

    def items(self, path: str) -> List[Dict[str, Any]]:
        return self.api("GET", path + ("&" if "?" in path else "?") + "limit=100")["items"]

    def turn(self, run: Run, body: Dict[str, Any], on_event: Optional[Callable[[str, Dict], None]] = None) -> "Turn":
        run.turns += 1
        t0 = time.monotonic()
        turn = Turn()
        self._stream(run, turn, "/lambda-url/stream/", body, t0, on_event)
        # A call that waits for the user's yes (deletes, several updates):
        # the eval's user says yes to all of them, as a user asking for it would,
        # and the answering turn's events belong to the same turn.
        for _ in range(3):
            waiting = [ev["approval_id"] for ev in turn.events if ev.get("type") == "approval_required"
                       and ev["approval_id"] not in turn.answered]
            if not waiting or not turn.session_id:
                break
            turn.answered.update(waiting)
            answer = {"approved": True, "more": [{"approval_id": a, "approved": True} for a in waiting[1:]]}
            path = f"/lambda-url/stream/sessions/{turn.session_id}/approvals/{waiting[0]}"
            self._stream(run, turn, path, answer, t0, on_event)
        return turn

    def _stream(self, run: Run, turn: "Turn", path: str, body: Dict[str, Any], t0: float,
                on_event: Optional[Callable[[str, Dict], None]]) -> None:
        req = urllib.request.Request(self.stack.base + path, data=json.dumps(body).encode(),
                                     method="POST", headers={"authorization": f"Bearer {self.token}",
                                                             "content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=1800) as r:
            name = ""
            for raw in r:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    ev = json.loads(line[5:])
                    turn.add(name or ev.get("type", ""), ev, time.monotonic() - t0, run)
                    if on_event:
                        on_event(name, ev)


class Turn:
    def __init__(self) -> None:
        self.events: List[Dict[str, Any]] = []
        self.text = ""
        # Where the answer being streamed began: an `answer_check` asked_again
        # withdraws the text since then (the chat page drops it too).
        self.answer_at = 0
        self.session_id = ""
        self.answered: set = set()

    def add(self, name: str, ev: Dict[str, Any], t: float, run: Run) -> None:
        self.events.append(ev)
        if name in ("text_delta", "tool_call") and run.first_event_s is None:
            run.first_event_s = round(t, 1)
        if name == "text_delta":
            self.text += ev.get("content", "")
        elif name in ("tool_result", "approval_required"):
            self.answer_at = len(self.text)
        elif name == "answer_check" and ev.get("verdict") == "asked_again":
            self.text = self.text[:self.answer_at]
        elif name == "tool_call":
            fn = ev["tool_call"]["function"]
            run.tool_calls.append(fn["name"])
            if run.first_tool_s is None:
                run.first_tool_s = round(t, 1)
        elif name == "session":
            self.session_id = ev["session"]["id"]
        elif name == "error":
            run.error = ev.get("code", "") or json.dumps(ev)[:120]
        elif name == "done":
            run.done_s, run.done_reason = round(t, 1), ev.get("reason", "")

    def calls(self, name: str) -> List[Dict[str, Any]]:
        out = []
        for ev in self.events:
            fn = ev.get("tool_call", {}).get("function", {}) if ev.get("type") == "tool_call" else {}
            if fn.get("name") == name:
                try:
                    out.append(json.loads(fn.get("arguments") or "{}"))
                except json.JSONDecodeError:
                    out.append({})
        return out

    def call_results(self, name: str) -> List[tuple]:
        """Each call of tool `name`: (arguments, ok) with ok from its tool_result (None if none came)."""
        calls, oks = [], {}
        for ev in self.events:
            if ev.get("type") == "tool_call" and ev["tool_call"]["function"].get("name") == name:
                fn = ev["tool_call"]["function"]
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except json.JSONDecodeError:
                    args = {}
                calls.append((ev["tool_call"].get("id"), args))
            elif ev.get("type") == "tool_result":
                oks[ev.get("tool_call_id")] = ev.get("ok")
        return [(args, oks.get(cid)) for cid, args in calls]

    def ok_results(self) -> int:
        return sum(1 for ev in self.events if ev.get("type") == "tool_result" and ev.get("ok"))


def title(e: Dict[str, Any]) -> str:
    """An entity's title or name, as the entities API lists it."""
    f = e.get("fields", e)
    return f.get("title") or f.get("name") or ""


def norm(s: str) -> str:
    return " ".join(s.lower().replace("\u201c", "").replace("\u201d", "").replace('"', "").split())


def in_project(pid: str, message: str) -> Dict[str, Any]:
    return {"message": message, "context_type": "project", "projectFocus": {"projectId": pid}}


# ---- scenarios: each returns (ok, why) ----

def create_project_with_task(u: User, run: Run):
    u.turn(run, {"message": "Create a project called Launch with a task Write the blog post"})
    projects = [p for p in u.items("/projects") if "launch" in norm(p["name"])]
    if not projects:
        return False, "no project named Launch"
    tasks = [title(t) for p in projects for t in u.items(f"/projects/{p['id']}/tasks")]
    ok = any("blog post" in norm(t) for t in tasks)
    return ok, f"tasks {tasks}"


def add_document_under_parent(u: User, run: Run):
    pid = u.project("Atlas")["id"]
    research = u.create(pid, "document", {"title": "Research", "content": "What we learned."})
    u.create(pid, "document", {"title": "Roadmap", "content": "Q3 plans."})
    u.turn(run, in_project(pid, "Add a document titled Competitor notes under the Research document."))

    def parent_of(nodes, parent, title_of):
        for n in nodes:
            if "competitor" in norm(title_of(n["id"])):
                return parent
            found = parent_of(n.get("children", []), n["id"], title_of)
            if found is not None:
                return found
        return None

    titles = {d["id"]: title(d) for d in u.items(f"/projects/{pid}/documents")}
    tree = u.api("GET", f"/projects/{pid}/doc-structure")["root"]
    parent = parent_of(tree, "(root)", lambda i: titles.get(i, ""))
    return parent == research, f"new document's parent: {titles.get(parent, parent)}"


def link_task_to_goal(u: User, run: Run):
    pid = u.project("Beta")["id"]
    goal = u.create(pid, "goal", {"name": "Public beta"})
    task = u.create(pid, "task", {"title": "Write the launch post"})
    u.turn(run, in_project(pid, "Link the task Write the launch post to the goal Public beta: the task supports the goal."))
    edges = u.api("GET", f"/projects/{pid}/edges?entity_id={task}")["items"]
    ends = [{e["from"]["id"], e["to"]["id"]} for e in edges]
    return {task, goal} in ends, f"edges {[(e['from']['kind'], e['relation'], e['to']['kind']) for e in edges]}"


def read_deep_document(u: User, run: Run):
    pid = u.project("Platform")["id"]
    specs = u.create(pid, "document", {"title": "Specs", "content": "All specifications."})
    api = u.create(pid, "document", {"title": "API", "content": "The public API.", "parent_id": specs})
    auth = u.create(pid, "document", {"title": "Auth", "parent_id": api,
                                      "content": "Access tokens expire after 17 minutes; refresh tokens after 30 days."})
    turn = u.turn(run, in_project(pid, "Read the document Specs / API / Auth and tell me when access tokens expire."))
    read = [a for n in ("read_document", "get_entity") for a in turn.calls(n)
            if auth in (a.get("document_id"), a.get("id"))]
    ok = bool(read) and "17" in turn.text
    return ok, f"read Auth: {bool(read)}; answer mentions 17: {'17' in turn.text}"


def plain_question(u: User, run: Run):
    turn = u.turn(run, {"message": "What is the capital of France? Answer in one word."})
    projects = u.items("/projects")
    ok = not run.tool_calls and not projects and "paris" in turn.text.lower()
    return ok, f"tools {run.tool_calls}, projects {len(projects)}, answer {turn.text[:60]!r}"


def stop_mid_turn(u: User, run: Run):
    stopped: Dict[str, Any] = {}

    def on_event(name: str, ev: Dict[str, Any]) -> None:
        if name == "session":
            stopped["sid"] = ev["session"]["id"]
        if name == "text_delta" and "sent" not in stopped:
            stopped["sent"] = time.monotonic()
            sid = stopped["sid"]
            # From another thread: this one keeps reading the stream.
            threading.Thread(target=lambda: stopped.update(
                answer=u.stack.call(u.token, "POST", f"/lambda-url/stream/sessions/{sid}/stop", {}))).start()

    turn = u.turn(run, {"message": "Write a 400-word essay on why small teams ship faster."}, on_event)
    if "sent" not in stopped:
        return False, "no text arrived to stop"
    after = time.monotonic() - stopped["sent"]
    msgs = u.stack.call(u.token, "GET", f"/lambda-url/stream/sessions/{turn.session_id}/messages")["messages"]
    last = msgs[-1] if msgs else {}
    ok = run.done_reason == "stopped" and last.get("role") == "assistant" and after < 10
    return ok, f"done {run.done_reason!r} {after:.1f}s after stop; stored {last.get('role')} {str(last.get('status', ''))}"


# ---- the calendar: the user is in Europe/Berlin; judged by the stored events' instants there ----

ZONE = "Europe/Berlin"


def local_today() -> "datetime.date":
    return datetime.datetime.now(ZoneInfo(ZONE)).date()


def in_calendar(message: str) -> Dict[str, Any]:
    return {"message": message, "context_type": "calendar", "timezone": ZONE}


def event(u: User, title_: str, start: str, minutes: int = 60) -> str:
    body = {"title": title_, "start": start, "duration_minutes": minutes, "timezone": ZONE}
    return u.api("POST", "/events", body)["data"]["id"]


def listed(u: User, day: "datetime.date") -> List[Dict[str, Any]]:
    return u.api("GET", f"/events?from={day}&to={day}&timezone={ZONE}")["events"]


def calendar_tomorrow(u: User, run: Run):
    tomorrow = local_today() + datetime.timedelta(days=1)
    event(u, "Dentist", f"{tomorrow}T09:00")
    event(u, "Team sync", f"{tomorrow}T14:00")
    event(u, "Board dinner", f"{tomorrow + datetime.timedelta(days=2)}T19:00")
    turn = u.turn(run, in_calendar("What is on my calendar tomorrow?"))
    text = norm(turn.text)
    ok = "dentist" in text and "team sync" in text and "board dinner" not in text
    return ok, f"answer {turn.text[:120]!r}"


def schedule_review(u: User, run: Run):
    today = local_today()
    # "next Tuesday": the first Tuesday after today.
    tuesday = today + datetime.timedelta(days=(1 - today.weekday()) % 7 or 7)
    u.turn(run, in_calendar("Schedule a 30-minute review with the team next Tuesday at 10."))
    events = listed(u, tuesday)
    got = [(e["title"], e["start"], e["end"]) for e in events]
    ok = any(e["start"].startswith(f"{tuesday}T10:00") and e["end"].startswith(f"{tuesday}T10:30") for e in events)
    return ok, f"on {tuesday}: {got}"


def move_three_to_four(u: User, run: Run):
    tomorrow = local_today() + datetime.timedelta(days=1)
    event(u, "Design review", f"{tomorrow}T15:00")
    event(u, "Lunch", f"{tomorrow}T12:00")
    u.turn(run, in_calendar("Move my 3pm tomorrow to 4pm."))
    events = {e["title"]: e["start"] for e in listed(u, tomorrow)}
    ok = events.get("Design review", "").startswith(f"{tomorrow}T16:00") and \
        events.get("Lunch", "").startswith(f"{tomorrow}T12:00") and len(events) == 2
    return ok, f"tomorrow: {events}"


# ---- the calendar as a 1.5 B model meets it (issue 40): series from a sentence, one occurrence
# cancelled or moved, "am I free" with a conflict, this week / next week, the whole calendar or a
# project's part. Phrased unlike the tool descriptions; judged by the stored events; a write
# scenario also fails when the answer claims a change the state does not show (claims_unshown).

DAY = datetime.timedelta(days=1)

# Words that claim a change, and the words that take a claim back when just before it.
CLAIMS = re.compile(r"\b(cancel+ed|deleted|removed|dropped|skipped|moved|rescheduled|shifted|added|booked|"
                    r"scheduled|created|set up|put (?:it|that|this|them|\w+ \w+) (?:in|on)|blocked)\b", re.I)
TAKEN_BACK = re.compile(r"(\bnot\b|n't\b|\bunable\b|\bfailed\b|\bcannot\b|\bno\b|\bnothing\b)[^.!?]{0,30}$", re.I)


def claims_change(text: str) -> Optional[str]:
    """The first phrase of `text` that says something was changed (not negated just before), or None."""
    for m in CLAIMS.finditer(text):
        if not TAKEN_BACK.search(text[:m.start()]):
            return m.group(0)
    return None


def claims_unshown(text: str, changed: bool) -> Optional[str]:
    """Why a run fails the claims judge: the answer claims a change and the state shows none."""
    claim = claims_change(text)
    return f"the answer claims {claim!r} but the calendar did not change" if claim and not changed else None


def span_events(u: User, first: "datetime.date", last: "datetime.date") -> List[Dict[str, Any]]:
    return u.api("GET", f"/events?from={first}&to={last}&timezone={ZONE}")["events"]


def snapshot(u: User, first: "datetime.date", last: "datetime.date") -> List[tuple]:
    return sorted((e["event_id"], e.get("instance") or "", e["title"], e["start"], e["end"])
                  for e in span_events(u, first, last))


def local_dt(s: str) -> "datetime.datetime":
    return datetime.datetime.fromisoformat(s).astimezone(ZoneInfo(ZONE))


def series(u: User, title_: str, start: str, rrule: str, minutes: int = 15) -> str:
    body = {"title": title_, "start": start, "duration_minutes": minutes, "timezone": ZONE,
            "recurrence": {"rrule": rrule}}
    return u.api("POST", "/events", body)["data"]["id"]


def judged_write(u: User, turn: "Turn", before: List[tuple], first, last, ok: bool, why: str):
    """A write scenario's verdict: its own check, and the claims judge over the same days."""
    unshown = claims_unshown(turn.text, snapshot(u, first, last) != before)
    return ok and not unshown, f"{unshown + '; ' if unshown else ''}{why}; answer {turn.text[:100]!r}"


def on_or_after(today: "datetime.date", weekday: int) -> "datetime.date":
    return today + datetime.timedelta(days=(weekday - today.weekday()) % 7)


def cal_weekday_series(u: User, run: Run):
    today = local_today()
    before = snapshot(u, today, today + 13 * DAY)
    turn = u.turn(run, in_calendar("I've got a standup at half past nine every weekday. Can you get that "
                                   "into my calendar?"))
    got = [e for e in span_events(u, today, today + 13 * DAY) if "standup" in norm(e["title"])]
    times = {(local_dt(e["start"]).weekday(), local_dt(e["start"]).strftime("%H:%M")) for e in got}
    weekend = [e["start"] for e in got if local_dt(e["start"]).weekday() >= 5]
    ok = len(got) >= 9 and not weekend and {t for _, t in times} == {"09:30"} and all(e["recurring"] for e in got)
    return judged_write(u, turn, before, today, today + 13 * DAY, ok,
                        f"{len(got)} standups in 14 days at {sorted({t for _, t in times})}, on weekends {weekend}")


def cal_fortnightly_series(u: User, run: Run):
    today = local_today()
    last = today + 41 * DAY
    before = snapshot(u, today, last)
    turn = u.turn(run, in_calendar("Budget check-in with Priya, Mondays at 4pm but only every other week. "
                                   "Please set it up."))
    got = sorted(local_dt(e["start"]) for e in span_events(u, today, last) if "budget" in norm(e["title"]))
    gaps = {(b.date() - a.date()).days for a, b in zip(got, got[1:])}
    ok = len(got) >= 2 and all(t.weekday() == 0 and t.strftime("%H:%M") == "16:00" for t in got) and gaps == {14}
    return judged_write(u, turn, before, today, last, ok, f"check-ins {[t.isoformat() for t in got]}")


def cal_series_with_an_end(u: User, run: Run):
    today = local_today()
    last = today + 59 * DAY
    before = snapshot(u, today, last)
    turn = u.turn(run, in_calendar("Sign me up for yoga on Wednesday evenings at 7 — three sessions in total, "
                                   "starting with the next one."))
    got = sorted(local_dt(e["start"]) for e in span_events(u, today, last) if "yoga" in norm(e["title"]))
    ok = len(got) == 3 and all(t.weekday() == 2 and t.strftime("%H:%M") == "19:00" for t in got)
    return judged_write(u, turn, before, today, last, ok, f"yoga {[t.isoformat() for t in got]}")


def cal_cancel_one_occurrence(u: User, run: Run):
    today = local_today()
    tomorrow = today + DAY
    series(u, "Standup", f"{today - 7 * DAY}T09:30", "FREQ=DAILY")
    before = snapshot(u, today, today + 3 * DAY)
    turn = u.turn(run, in_calendar("I can't make tomorrow's standup. Take just that one off — the other days "
                                   "stay as they are."))
    day = lambda d: [e for e in span_events(u, d, d) if "standup" in norm(e["title"])]  # noqa: E731
    gone, kept = day(tomorrow), day(tomorrow + DAY) + day(tomorrow + 2 * DAY)
    ok = not gone and len(kept) == 2
    return judged_write(u, turn, before, today, today + 3 * DAY, ok,
                        f"tomorrow {len(gone)} standup(s), the two days after {len(kept)}")


def cal_move_one_occurrence(u: User, run: Run):
    today = local_today()
    tomorrow = today + DAY
    series(u, "Standup", f"{today - 7 * DAY}T09:30", "FREQ=DAILY")
    before = snapshot(u, today, today + 3 * DAY)
    turn = u.turn(run, in_calendar("Tomorrow the standup has to happen at 11 instead. Only tomorrow; "
                                   "after that it's back to normal."))
    at = lambda d: [local_dt(e["start"]).strftime("%H:%M") for e in span_events(u, d, d)  # noqa: E731
                    if "standup" in norm(e["title"])]
    ok = at(tomorrow) == ["11:00"] and at(tomorrow + DAY) == ["09:30"]
    return judged_write(u, turn, before, today, today + 3 * DAY, ok,
                        f"tomorrow {at(tomorrow)}, the day after {at(tomorrow + DAY)}")


def cal_free_with_a_conflict(u: User, run: Run):
    today = local_today()
    friday = on_or_after(today, 4)
    event(u, "Budget review", f"{friday}T14:00")
    before = snapshot(u, today, friday)
    turn = u.turn(run, in_calendar("Could I squeeze a two-hour workshop into Friday afternoon, or is "
                                   "something already there?"))
    text = norm(turn.text)
    names = "budget" in text
    # A question, not a booking: nothing may change, nor be said to.
    unchanged = snapshot(u, today, friday) == before
    unshown = claims_unshown(turn.text, not unchanged)
    ok = names and unchanged and not unshown
    return ok, f"names the budget review: {names}; calendar unchanged: {unchanged}; answer {turn.text[:100]!r}"


def week_setup(u: User) -> tuple:
    """Quarterly planning on this week's Sunday (Monday–Sunday weeks: never before today), an offsite on
    next week's Wednesday."""
    today = local_today()
    sunday = today + datetime.timedelta(days=6 - today.weekday())
    event(u, "Quarterly planning", f"{sunday}T11:00")
    event(u, "Team offsite", f"{sunday + 3 * DAY}T10:00")
    return "quarterly planning", "team offsite"


def cal_this_week(u: User, run: Run):
    this, nxt = week_setup(u)
    turn = u.turn(run, in_calendar("Anything on my plate this week?"))
    text = norm(turn.text)
    return this in text and nxt not in text, f"answer {turn.text[:140]!r}"


def cal_next_week(u: User, run: Run):
    this, nxt = week_setup(u)
    turn = u.turn(run, in_calendar("And what does the week after this one look like?"))
    text = norm(turn.text)
    return nxt in text and this not in text, f"answer {turn.text[:140]!r}"


def project_and_private(u: User) -> "datetime.date":
    """A project Launch with a rehearsal linked to it, and a dentist appointment of no project, both tomorrow."""
    tomorrow = local_today() + DAY
    pid = u.project("Launch")["id"]
    u.api("POST", "/events", {"title": "Launch rehearsal", "start": f"{tomorrow}T10:00", "duration_minutes": 60,
                              "timezone": ZONE, "project_id": pid})
    event(u, "Dentist appointment", f"{tomorrow}T15:00")
    return tomorrow


def cal_whole_calendar(u: User, run: Run):
    project_and_private(u)
    turn = u.turn(run, in_calendar("Give me a rundown of everything I have coming up over the next few days."))
    text = norm(turn.text)
    ok = "rehearsal" in text and "dentist" in text
    return ok, f"answer {turn.text[:140]!r}"


def cal_one_project(u: User, run: Run):
    project_and_private(u)
    turn = u.turn(run, in_calendar("Only the Launch project: which of its meetings are coming up in the next "
                                   "few days?"))
    text = norm(turn.text)
    ok = "rehearsal" in text and "dentist" not in text
    return ok, f"answer {turn.text[:140]!r}"


def cal_book_around_a_conflict(u: User, run: Run):
    today = local_today()
    tuesday = today + datetime.timedelta(days=(1 - today.weekday()) % 7 or 7)
    event(u, "Client call", f"{tuesday}T09:00", 90)
    before = snapshot(u, tuesday, tuesday)
    turn = u.turn(run, in_calendar("Next Tuesday morning, find an hour I'm not busy and block it for "
                                   "interview prep."))
    prep = [(local_dt(e["start"]), local_dt(e["end"])) for e in span_events(u, tuesday, tuesday)
            if "interview" in norm(e["title"])]
    call_end = datetime.datetime.fromisoformat(f"{tuesday}T10:30").replace(tzinfo=ZoneInfo(ZONE))
    ok = len(prep) == 1 and (prep[0][1] - prep[0][0]) == datetime.timedelta(hours=1) \
        and prep[0][0] >= call_end and prep[0][1].hour <= 12 and prep[0][1].date() == tuesday
    return judged_write(u, turn, before, tuesday, tuesday, ok, f"prep {[(a.isoformat(), b.isoformat()) for a, b in prep]}")


# ---- the same skills in other words (stop 47): the calendar block reads the message (calendar/spoken);
# these check it on sentences its tests and the scenarios above do not use.

def cal_lessons_with_a_count(u: User, run: Run):
    today = local_today()
    last = today + 59 * DAY
    before = snapshot(u, today, last)
    turn = u.turn(run, in_calendar("Put piano lessons in for Thursday afternoons at half four, six lessons."))
    got = sorted(local_dt(e["start"]) for e in span_events(u, today, last) if "piano" in norm(e["title"]))
    ok = len(got) == 6 and all(t.weekday() == 3 and t.strftime("%H:%M") == "16:30" for t in got)
    return judged_write(u, turn, before, today, last, ok, f"piano {[t.isoformat() for t in got]}")


def cal_push_by_clock(u: User, run: Run):
    tomorrow = local_today() + DAY
    event(u, "Vendor call", f"{tomorrow}T10:00")
    event(u, "Gym", f"{tomorrow}T13:00")
    before = snapshot(u, tomorrow, tomorrow)
    turn = u.turn(run, in_calendar("Push my 10 o'clock tomorrow back to noon."))
    events = {e["title"]: local_dt(e["start"]).strftime("%H:%M") for e in listed(u, tomorrow)}
    ok = events == {"Vendor call": "12:00", "Gym": "13:00"}
    return judged_write(u, turn, before, tomorrow, tomorrow, ok, f"tomorrow {events}")


def cal_drop_one(u: User, run: Run):
    friday = on_or_after(local_today() + DAY, 4)
    event(u, "Budget review", f"{friday}T14:00")
    event(u, "Retro", f"{friday}T16:00")
    before = snapshot(u, friday, friday)
    turn = u.turn(run, in_calendar("Drop Friday's budget review, please."))
    titles = sorted(e["title"] for e in listed(u, friday))
    return judged_write(u, turn, before, friday, friday, titles == ["Retro"], f"friday {titles}")


def cal_what_on_a_date(u: User, run: Run):
    day = local_today() + 9 * DAY
    event(u, "Offsite", f"{day}T10:00")
    event(u, "Dentist", f"{day + DAY}T09:00")
    turn = u.turn(run, in_calendar(f"What have I got on {day:%B} {day.day}?"))
    text = norm(turn.text)
    return "offsite" in text and "dentist" not in text, f"answer {turn.text[:140]!r}"


OTHER_WORDS = (cal_lessons_with_a_count, cal_push_by_clock, cal_drop_one, cal_what_on_a_date)


ISSUE_40 = (cal_weekday_series, cal_fortnightly_series, cal_series_with_an_end, cal_cancel_one_occurrence,
            cal_move_one_occurrence, cal_free_with_a_conflict, cal_this_week, cal_next_week, cal_whole_calendar,
            cal_one_project, cal_book_around_a_conflict)


def self_test() -> int:
    """The deterministic judges on fixed answers, without a stack (`--self-test`)."""
    cases = [
        ("I've cancelled tomorrow's standup only.", False, True),
        ("I've cancelled tomorrow's standup only.", True, False),
        ("Done: the standup is moved to 11:00 tomorrow.", False, True),
        ("I have added a daily standup at 09:30.", False, True),
        ("I could not cancel it: the event was not found.", False, False),
        ("Yes, you are free Friday afternoon.", False, False),
        ("You have a Budget review at 14:00 on Friday, so only 15:00–17:00 is free.", False, False),
        ("Nothing was booked.", False, False),
    ]
    bad = [(t, c, want) for t, c, want in cases if bool(claims_unshown(t, c)) != want]
    for t, c, want in bad:
        print(f"claims judge: {t!r} (changed {c}): expected {'a failure' if want else 'a pass'}", file=sys.stderr)
    today = datetime.date(2026, 12, 6)
    if on_or_after(today, 4) != datetime.date(2026, 12, 11) or on_or_after(today, 6) != today:
        print("on_or_after is off", file=sys.stderr)
        bad.append(("on_or_after", False, False))
    # An answer asked again is withdrawn: the judge reads only the one that stood.
    turn, run = Turn(), Run("self")
    for name, ev in [("text_delta", {"content": "Let me look. "}), ("tool_result", {"ok": True}),
                     ("text_delta", {"content": "What is on my calendar tomorrow?"}),
                     ("answer_check", {"verdict": "asked_again"}), ("text_delta", {"content": "The dentist."})]:
        turn.add(name, ev, 0.0, run)
    if turn.text != "Let me look. The dentist.":
        print(f"a withdrawn answer is still read: {turn.text!r}", file=sys.stderr)
        bad.append(("withdrawn", False, False))
    print(f"self-test: {len(cases) + 2 - len(bad)}/{len(cases) + 2} passed")
    return 1 if bad else 0


# ---- the web and utility tools (issue 28) ----

# The local page server's port: the stack allows web_visit to reach it only
# through WEB_FETCH_ALLOW_CIDRS / WEB_FETCH_ALLOW_PORTS (scripts/stack.sh sets
# them for this port; production never does).
EVAL_WEB_PORT = int(os.environ.get("EVAL_WEB_PORT", "8790"))

PRICING_PAGE = b"""<html><head><title>Pricing | Example Cloud</title></head><body>
<nav><a href="/">Home</a> <a href="/docs">Docs</a></nav>
<article><h1>Pricing</h1><p>The starter plan of Example Cloud costs 37 euros a month and includes five
projects, unlimited tasks and email support on working days. Larger teams take the growth plan.</p>
<h2>Growth</h2><p>The growth plan costs 149 euros a month with unlimited projects, single sign-on and
priority support, billed monthly or yearly.</p></article><footer>Cookie settings</footer></body></html>"""


class PageServer:
    """A local web page for `web_visit`, recording each path requested."""

    def __init__(self, port: int):
        self.paths: List[str] = []
        seen = self.paths

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                seen.append(self.path)
                body, status = (PRICING_PAGE, 200) if self.path.startswith("/pricing") else (b"not found", 404)
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8" if status == 200 else "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def read_local_page(u: User, run: Run):
    url = f"http://127.0.0.1:{EVAL_WEB_PORT}/pricing"
    pages = PageServer(EVAL_WEB_PORT)
    try:
        turn = u.turn(run, {"message": f"Read the page {url} and tell me what the starter plan costs.",
                            "context_type": "global"})
    finally:
        pages.close()
    visits = turn.call_results("web_visit")
    read = [ok for args, ok in visits if str(args.get("url", "")).rstrip("/") == url]
    ok = bool(read) and any(read) and any(p.startswith("/pricing") for p in pages.paths)
    return ok, f"web_visit calls {[(a.get('url'), k) for a, k in visits]}; the server saw {pages.paths}"


def linked_entities_of_goal(u: User, run: Run):
    pid = u.project("Beta")["id"]
    goal = u.create(pid, "goal", {"name": "Public beta"})
    task = u.create(pid, "task", {"title": "Write the launch post"})
    risk = u.create(pid, "risk", {"title": "Late security review"})
    for frm, rel, to in (({"kind": "task", "id": task}, "supports", {"kind": "goal", "id": goal}),
                         ({"kind": "risk", "id": risk}, "blocks", {"kind": "task", "id": task})):
        u.api("POST", f"/projects/{pid}/edges", {"from": frm, "relation": rel, "to": to})
    turn = u.turn(run, in_project(pid, "What is linked to the goal Public beta, directly or through one other "
                                       "entity? List them with how they are linked."))
    calls = turn.call_results("get_linked_entities")
    on_goal = [(args.get("depth"), ok) for args, ok in calls if args.get("entity_id") == goal]
    ok = any(k for _, k in on_goal)
    return ok, f"get_linked_entities on the goal (depth, ok): {on_goal}; all calls {run.tool_calls}"


# ---- issue 31: conversations, project creation, plans, renames, deletes, reads, recovery ----
# (one block, so scenarios other work adds elsewhere merge without conflict)


def tasks_of(u: User, pid: str) -> List[Dict[str, Any]]:
    return u.items(f"/projects/{pid}/tasks")


def two_turn_change(u: User, run: Run):
    pid = u.project("Venue")["id"]
    first = u.turn(run, in_project(pid, "Add a task called Book the venue."))
    body = in_project(pid, "Actually, rename that task to Book the conference venue.")
    body["session_id"] = first.session_id
    # The first turn's session may still be finishing (its lease): a client
    # asked to wait retries, as the chat page would.
    for _ in range(12):
        run.error = ""
        u.turn(run, body)
        if run.error != "session_busy":
            break
        run.turns -= 1
        time.sleep(5)
    titles = [title(t) for t in tasks_of(u, pid)]
    ok = len(titles) == 1 and "conference venue" in norm(titles[0])
    return ok, f"tasks {titles}"


def project_create_vague(u: User, run: Run):
    turn = u.turn(run, {"message": "I want to start something new.", "context_type": "project_create"})
    projects = u.items("/projects")
    asked = "ask_clarifying_questions" in run.tool_calls or "?" in turn.text
    return not projects and asked, f"projects {[p['name'] for p in projects]}, asked: {asked}"


def project_create_clear(u: User, run: Run):
    u.turn(run, {"message": "Create a project called Garden Redesign: redo the back garden before spring.",
                 "context_type": "project_create"})
    names = [p["name"] for p in u.items("/projects")]
    return any("garden redesign" in norm(n) for n in names), f"projects {names}"


def plan_two_steps(u: User, run: Run):
    pid = u.project("Offsite")["id"]
    u.turn(run, in_project(pid, "Make a plan with two steps: first create a task Draft the agenda, "
                                "then create a task Send the invites. Run it."))
    titles = [norm(title(t)) for t in tasks_of(u, pid)]
    ok = any("draft the agenda" in t for t in titles) and any("send the invites" in t for t in titles)
    return ok, f"tasks {titles}"


def rename_task(u: User, run: Run):
    p = u.project("Gamma")
    task = u.create(p["id"], "task", {"title": "Write the launch post"})
    u.turn(run, in_project(p["id"], "Rename the task Write the launch post to Write the launch announcement."))
    got = u.api("GET", f"/projects/{p['id']}/tasks/{task}")
    name = u.api("GET", f"/projects/{p['id']}")["name"]
    ok = "launch announcement" in norm(title(got)) and name == "Gamma"
    return ok, f"task {title(got)!r}, project {name!r}"


def delete_task(u: User, run: Run):
    pid = u.project("Delta")["id"]
    old = u.create(pid, "task", {"title": "Old draft"})
    keep = u.create(pid, "task", {"title": "Final draft"})
    u.turn(run, in_project(pid, "Delete the task Old draft."))
    ids = [t["id"] for t in tasks_of(u, pid)]
    try:
        u.api("GET", f"/projects/{pid}/tasks/{old}")
        gone = False
    except RuntimeError as e:  # the API's answer for a deleted task: 404
        gone = "HTTP 404" in str(e)
    return gone and keep in ids, f"GET Old draft 404: {gone}; Final draft kept: {keep in ids}"


def answer_from_document(u: User, run: Run):
    pid = u.project("Pricing")["id"]
    doc = u.create(pid, "document", {"title": "Pricing", "content": "The Pro plan costs 42 euros per month; "
                                                                    "the Team plan 99 euros."})
    turn = u.turn(run, in_project(pid, "How much does the Pro plan cost per month?"))
    read = [a for n in ("read_document", "get_entity") for a in turn.calls(n)
            if doc in (a.get("document_id"), a.get("id"))]
    ok = bool(read) and "42" in turn.text
    return ok, f"read Pricing: {bool(read)}; answer mentions 42: {'42' in turn.text}"


def what_can_you_do(u: User, run: Run):
    # Issue 44 §4: asked about itself, the model reads the generated overview
    # instead of guessing (judged by the tool-call log), and says something
    # the overview says (the calendar, or approvals).
    turn = u.turn(run, {"message": "What can you do? And how do I get you to ask me before deleting things?"})
    called = "get_buildos_overview" in run.tool_calls
    said = any(w in turn.text.lower() for w in ("calendar", "approv", "ask first", "ask you first"))
    return called and said, f"called get_buildos_overview: {called}; calls {run.tool_calls}; answer {turn.text[:80]!r}"


def recover_from_tool_error(u: User, run: Run):
    pid = u.project("Epsilon")["id"]
    task = u.create(pid, "task", {"title": "Write the launch post"})
    bogus = str(uuid.uuid4())
    u.turn(run, in_project(pid, f"Rename the task {bogus} (the one titled Write the launch post) "
                                "to Write the launch blog."))
    got = title(u.api("GET", f"/projects/{pid}/tasks/{task}"))
    return "launch blog" in norm(got), f"task {got!r}; calls {run.tool_calls}"


def reorganize_docs(u: User, run: Run):
    """Issue 44: a batch of moves and a relation change in one step. Four changes
    wait for the user's yes (the eval's user says yes); success is the end state,
    whichever tools the model took to reach it."""
    pid = u.project("Orbit")["id"]
    specs = u.create(pid, "document", {"title": "Specs", "content": "All specifications."})
    docs = {t: u.create(pid, "document", {"title": t, "content": f"{t}."}) for t in ("API notes", "Glossary", "FAQ")}
    goal = u.create(pid, "goal", {"name": "Public beta"})
    task = u.create(pid, "task", {"title": "Write the launch post"})
    u.turn(run, in_project(pid, "Reorganize the project in one step: put the documents API notes, Glossary and FAQ "
                                "under the Specs document, and link the task Write the launch post to the goal "
                                "Public beta (the task supports the goal)."))
    tree = u.api("GET", f"/projects/{pid}/doc-structure")["root"]
    under = next(([c["id"] for c in n.get("children", [])] for n in tree if n["id"] == specs), [])
    moved = [t for t, d in docs.items() if d in under]
    edges = u.api("GET", f"/projects/{pid}/edges?entity_id={task}")["items"]
    linked = any({e["from"]["id"], e["to"]["id"]} == {task, goal} for e in edges)
    one_step = "reorganize_project" in run.tool_calls
    return len(moved) == 3 and linked, f"under Specs: {moved}; linked: {linked}; reorganize_project used: {one_step}"


# ---- issue 44: the modes (audit, forecast, daily brief, brain dump) ----

def in_mode(mode: str, message: str, pid: Optional[str] = None, sid: str = "") -> Dict[str, Any]:
    body: Dict[str, Any] = {"message": message, "context_type": mode, "timezone": ZONE}
    if pid:
        body["projectFocus"] = {"projectId": pid}
    if sid:
        body["session_id"] = sid
    return body


def ms_in(days: float) -> int:
    return int((time.time() + days * 86400) * 1000)


def audit_finds_and_fixes_a_gap(u: User, run: Run):
    """The audit block names the unlinked task; with the user's yes the model links it (judged by state)."""
    pid = u.project("Zeta")["id"]
    task = u.create(pid, "task", {"title": "Fix the footer"})
    goal = u.create(pid, "goal", {"name": "Grow readership"})
    first = u.turn(run, in_mode("project_audit", "Audit this project.", pid))
    u.turn(run, in_mode("project_audit", "Yes: link Fix the footer to the goal Grow readership.", pid,
                        first.session_id))
    edges = u.api("GET", f"/projects/{pid}/edges")["items"]
    linked = any({e["from"]["id"], e["to"]["id"]} == {task, goal} for e in edges)
    named = "footer" in norm(first.text)
    return linked and named, f"audit named the footer task: {named}; linked after the yes: {linked}"


def forecast_names_what_is_late(u: User, run: Run):
    """The forecast block has the dates: the answer names the late milestone without listing (tool-call log)."""
    pid = u.project("Eta")["id"]
    u.create(pid, "milestone", {"title": "Beta release", "due_at": ms_in(-3)})
    u.create(pid, "milestone", {"title": "Public launch", "due_at": ms_in(10)})
    turn = u.turn(run, in_mode("project_forecast", "What is late, and what comes next?", pid))
    text = norm(turn.text)
    listed_ = [c for c in run.tool_calls if c in ("list_entities", "search_project")]
    ok = "beta" in text and "launch" in text and not listed_
    return ok, f"answer {turn.text[:120]!r}; listing calls {listed_}"


def daily_brief_from_the_block(u: User, run: Run):
    """Today's event and a task due today, across a project, from the brief block alone (tool-call log)."""
    pid = u.project("Home")["id"]
    today = local_today()
    u.create(pid, "task", {"title": "Pay the rent", "due_at": ms_in(0.01)})
    event(u, "Standup", f"{today}T23:30", 15)
    turn = u.turn(run, in_mode("daily_brief_update", "Brief me for today."))
    text = norm(turn.text)
    reads = [c for c in run.tool_calls if c in ("list_calendar_events", "search_workspace", "list_projects")]
    ok = "standup" in text and "rent" in text and not reads
    return ok, f"answer {turn.text[:120]!r}; reads {reads}"


def brain_dump_one_batch(u: User, run: Run):
    """Loose thoughts become one propose_entities batch, approved once (the eval user says yes); judged by state
    and by the tool-call log (one batch, no direct creates)."""
    pid = u.project("Party")["id"]
    u.turn(run, in_mode("brain_dump", "Brain dump: I have to call the caterer and order flyers, and the whole "
                                      "point is a great birthday party. Turn that into tasks and a goal.", pid))
    titles = [norm(title(t)) for t in tasks_of(u, pid)]
    goals = [norm(title(g)) for g in u.items(f"/projects/{pid}/goals")]
    creates = [c for c in run.tool_calls if c.startswith("create_")]
    ok = (run.tool_calls.count("propose_entities") == 1 and not creates
          and any("caterer" in t for t in titles) and any("flyer" in t for t in titles) and goals != [])
    return ok, f"tasks {titles}, goals {goals}; calls {run.tool_calls}"


ISSUE_44 = (audit_finds_and_fixes_a_gap, forecast_names_what_is_late, daily_brief_from_the_block,
            brain_dump_one_batch)


ISSUE_31 = (two_turn_change, project_create_vague, project_create_clear, plan_two_steps, rename_task, delete_task,
            answer_from_document, recover_from_tool_error)

SCENARIOS = {f.__name__: f for f in (create_project_with_task, add_document_under_parent, link_task_to_goal,
                                     read_deep_document, plain_question, stop_mid_turn,
                                     calendar_tomorrow, schedule_review, move_three_to_four,
                                     read_local_page, linked_entities_of_goal, *ISSUE_31, *ISSUE_40, what_can_you_do, reorganize_docs, *ISSUE_44,
                                     *OTHER_WORDS)}


def run_one(stack: Stack, name: str, i: int, tag: str) -> Run:
    run = Run(name)
    try:
        u = User(stack, f"eval-{tag}-{name[:12]}-{i}")
        run.ok, run.why = SCENARIOS[name](u, run)
    except Exception as e:  # noqa: BLE001 - a broken run is a failed run, with its reason
        run.ok, run.why = False, f"{type(e).__name__}: {e}"
    return run


def med(xs: List[Optional[float]]) -> str:
    xs = [x for x in xs if x is not None]
    return f"{statistics.median(xs):.1f}" if xs else "–"


def table(runs: List[Run]) -> str:
    """Per scenario: the plain pass rate, and pass^k (τ-bench's: did all k
    runs pass), k being the scenario's number of runs."""
    lines = ["| scenario | passed | pass^k | turns | tool calls (median) | first event s (median) "
             "| first tool call s (median) | done s (median) |", "|---|---|---|---|---|---|---|---|"]
    all_k, names = 0, 0
    for name in SCENARIOS:
        rs = [r for r in runs if r.scenario == name]
        if not rs:
            continue
        passed = sum(r.ok for r in rs)
        names += 1
        all_k += passed == len(rs)
        lines.append(f"| {name} | {passed}/{len(rs)} | {'yes' if passed == len(rs) else 'no'} (k={len(rs)}) "
                     f"| {sum(r.turns for r in rs) / len(rs):.0f} "
                     f"| {med([len(r.tool_calls) for r in rs])} | {med([r.first_event_s for r in rs])} "
                     f"| {med([r.first_tool_s for r in rs])} | {med([r.done_s for r in rs])} |")
    total = sum(r.ok for r in runs)
    lines.append(f"| **all** | **{total}/{len(runs)} ({100 * total // max(len(runs), 1)}%)** "
                 f"| **{all_k}/{names} ({100 * all_k // max(names, 1)}%)** | | | | | |")
    return "\n".join(lines)


def main() -> int:
    if "--self-test" in sys.argv[1:]:
        return self_test()
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="the cargo lambda watch base URL")
    ap.add_argument("--cli", required=True)
    ap.add_argument("--self-test", action="store_true", help="check the deterministic judges, no stack")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default="")
    ap.add_argument("scenarios", nargs="*", help=f"default: all of {list(SCENARIOS)}")
    a = ap.parse_args()
    names = a.scenarios or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print(f"unknown scenario(s) {unknown}; known: {list(SCENARIOS)}", file=sys.stderr)
        return 2
    stack, tag, runs = Stack(a.url, a.cli), uuid.uuid4().hex[:6], []
    for i in range(a.reps):
        for name in names:
            r = run_one(stack, name, i, tag)
            runs.append(r)
            print(f"{'PASS' if r.ok else 'FAIL'} {name} #{i + 1}: {len(r.tool_calls)} call(s) {r.tool_calls} "
                  f"first {r.first_event_s}s tool {r.first_tool_s}s done {r.done_s}s "
                  f"{r.done_reason}{' error ' + r.error if r.error else ''} — {r.why}", flush=True)
            if a.json:
                with open(a.json, "w") as f:
                    json.dump([asdict(x) for x in runs], f, indent=1)
    print()
    print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
