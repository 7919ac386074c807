"""Slack workspace exports: a document per channel and day, one per channel and one per person.

An export (Workspace settings, Import/Export data) unzips to a folder holding
``users.json`` and ``channels.json`` (with ``groups.json``, ``mpims.json``
and ``dms.json`` on plans that export private conversations), and a folder
per channel with a JSON file per day it had messages, ``general/2024-01-15.json``.
A day is a list of messages: ``ts`` (seconds, as a string, which is also the
message's id), ``user``, ``user_profile`` (``real_name``, ``display_name``)
on messages since 2019, ``text`` in Slack's markup (``<@U123>``,
``<#C123|general>``, ``<https://...|label>``, ``<!here>``), ``thread_ts`` and
``reply_count`` on a thread's root, ``thread_ts`` on a reply, ``files``,
``subtype`` (``channel_join``, ``bot_message``, ...).

- A day file is one document, its card: kind ``day``, titled ``#channel``
  (the folder's name), its section the day, its text the day's messages in
  order, a line each, ``Name: text`` (a reply in a thread indented), Slack's
  markup read as it shows (``@Name`` when the day names the person, else
  ``@U123``; ``#general``; a link's label and address). Fields: ``channel``, ``day``, ``messages``, ``people``,
  ``first_ms`` / ``last_ms``, ``mentions`` (user ids), ``threads`` (the
  ``ts`` of its thread roots) and ``replies_to`` (``{thread, offset}``: each
  thread begun another day that its replies continue, and the UTF-8 offset
  of the first of them), which the ``slackthread`` detector follows.
  Joins, leaves and other notices (``subtype`` ``channel_join``, ...) are
  left out.
- ``channels.json`` (and the private lists) is a document per channel,
  ``{path}#{channel id}`` (kind ``channel``: its purpose and topic, with
  ``members`` counted and ``created_ms``).
- ``users.json`` is a document per person, ``{path}#{user id}`` (kind
  ``person``: name, real name, title; ``deleted`` and ``is_bot`` when true).

A file is taken for part of an export by its name and its first kilobyte; one
that reads so but is not a list of such records is passed by as ``no_format``.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document, json_head, load_json
from xerj_core.autoindex.formats import NO_FORMAT, FormatDeclined, file_name
from xerj_core.model import SourceDocument

USERS = "users.json"
CONVERSATIONS = frozenset({"channels.json", "groups.json", "mpims.json", "dms.json"})
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}\.json")
# a list of records as Slack writes them: a user's or a channel's id, or a message's ts and type
_HEAD = re.compile(rb'^\s*\[\s*(?:\]|\{)')
_DAY_KEYS = re.compile(rb'"ts"\s*:\s*"\d+\.\d+"')
_RECORD_KEYS = re.compile(rb'"id"\s*:\s*"[UWCGD][A-Z0-9]{6,}"')
# Slack's markup in a message's text: <@U123>, <@U123|name>, <#C123|general>, <!here>, <https://x|label>
_MARKUP = re.compile(r"<([@#!])([^|>]*)(?:\|([^>]*))?>|<([^|>@#!][^|>]*)(?:\|([^>]*))?>")
_NOTICES = frozenset({"channel_join", "channel_leave", "group_join", "group_leave", "channel_purpose",
                      "channel_topic", "channel_name", "channel_archive", "channel_unarchive", "pinned_item",
                      "bot_add", "bot_remove", "reminder_add"})
_ENTITIES = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))


class SlackFormat:
    """Slack export folders into ``ax-chats``: a day's messages, a channel, a person, each a document."""

    name = "slack"
    dataset = "ax-chats"
    priority = 20
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        head = json_head(rel_path, head)
        if head is None or _HEAD.match(head) is None:
            return False
        name = file_name(rel_path)
        if _DAY.fullmatch(name):
            return "/" in rel_path and _DAY_KEYS.search(head) is not None
        return (name == USERS or name in CONVERSATIONS) and _RECORD_KEYS.search(head) is not None

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        records = load_json(data, rel_path)
        if not isinstance(records, list) or not all(isinstance(record, dict) for record in records):
            raise FormatDeclined("not part of a Slack export: not a list of records", kind=NO_FORMAT)
        name = file_name(rel_path)
        if name not in CONVERSATIONS and name != USERS:
            return [self._day(rel_path, mtime_ms, records)]
        make = self._person if name == USERS else self._channel
        docs = [make(rel_path, mtime_ms, record, n) for n, record in enumerate(records, 1)
                if isinstance(record.get("id"), str) and record["id"]]
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=name, text="", section="", kind="file",
                        records=len(docs))
        return [card, *docs]

    def _person(self, rel_path: str, mtime_ms: int, user: dict[str, Any], n: int) -> SourceDocument:
        profile = user.get("profile") if isinstance(user.get("profile"), dict) else {}
        real = _str(user.get("real_name")) or _str(profile.get("real_name"))
        handle = _str(profile.get("display_name")) or _str(user.get("name"))
        title = real or handle or user["id"]
        lines = [line for line in (real, f"@{handle}" if handle else "", _str(profile.get("title"))) if line]
        return document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#{user['id']}", title=title,
                        text="\n".join(lines), section=title, kind="person", ordinal=n, user_id=user["id"],
                        handle=handle or None, deleted=True if user.get("deleted") else None,
                        is_bot=True if user.get("is_bot") else None)

    def _channel(self, rel_path: str, mtime_ms: int, channel: dict[str, Any], n: int) -> SourceDocument:
        name = _str(channel.get("name")) or channel["id"]
        said = [_str(part.get("value")) for part in (channel.get("purpose"), channel.get("topic"))
                if isinstance(part, dict)]
        members = channel.get("members")
        created = channel.get("created")
        return document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#{channel['id']}", title=f"#{name}",
                        text="\n".join(line for line in said if line), section=name, kind="channel", ordinal=n,
                        channel_id=channel["id"], channel=name,
                        members=len(members) if isinstance(members, list) else None,
                        created_ms=created * 1000 if isinstance(created, int) and created > 0 else None,
                        archived=True if channel.get("is_archived") else None)

    def _day(self, rel_path: str, mtime_ms: int, messages: list[dict[str, Any]]) -> SourceDocument:
        channel = posixpath.basename(posixpath.dirname(rel_path)) or "channel"  # a day sits in its channel's folder
        day = file_name(rel_path)[:-len(".json")]
        names = {user: name for message in messages if (user := _str(message.get("user")))
                 and (name := _sender(message, ""))}
        lines, people, instants, mentions, threads = [], [], [], [], []
        replies_to: dict[str, int] = {}  # a thread begun another day: the UTF-8 offset of its first reply here
        at = 0
        for message in sorted(messages, key=_order):
            if message.get("subtype") in _NOTICES:
                continue
            ts, thread = _str(message.get("ts")), _str(message.get("thread_ts"))
            text, named = _readable(_str(message.get("text")), names)
            files = [_str(f.get("name")) or _str(f.get("title")) for f in message.get("files") or ()
                     if isinstance(f, dict)]
            text = " ".join([text, *(f"[file {name}]" for name in files if name)]).strip()
            if not text:
                continue
            sender = _sender(message, _str(message.get("user")) or "Someone")
            reply = bool(thread) and thread != ts
            line = f"{'  ' if reply else ''}{sender}: {text}"
            if reply and thread not in threads:
                replies_to.setdefault(thread, at)
            elif thread == ts or message.get("reply_count"):
                threads.append(ts)
            lines.append(line)
            at += len(line.encode("utf-8")) + 1
            people.append(sender)
            mentions += named
            if ts.replace(".", "", 1).isdecimal():
                instants.append(int(float(ts) * 1000))
        return document(self, rel_path, mtime_ms, doc_id=rel_path, title=f"#{channel}", text="\n".join(lines),
                        section=day, kind="day", channel=channel, day=day, messages=len(lines),
                        people=list(dict.fromkeys(people)) or None, first_ms=min(instants, default=None),
                        last_ms=max(instants, default=None), mentions=list(dict.fromkeys(mentions)) or None,
                        threads=threads or None,
                        replies_to=[{"thread": ts, "offset": at} for ts, at in replies_to.items()] or None)


def _str(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _order(message: dict[str, Any]) -> float:
    try:
        return float(message.get("ts") or 0)
    except (TypeError, ValueError):
        return 0.0


def _sender(message: dict[str, Any], fallback: str) -> str:
    profile = message.get("user_profile") if isinstance(message.get("user_profile"), dict) else {}
    return (_str(profile.get("real_name")) or _str(profile.get("display_name")) or _str(message.get("user_name"))
            or _str(message.get("username")) or fallback)


def _readable(text: str, names: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with Slack's markup as Slack shows it, and the ids of the people it mentions."""
    mentioned: list[str] = []

    def shown(match: re.Match[str]) -> str:
        sigil, target, label, address, link_label = match.groups()
        if sigil == "@":
            mentioned.append(target)
            return f"@{label or names.get(target) or target}"
        if sigil == "#":
            return f"#{label or target}"
        if sigil == "!":
            return f"@{label or target.split('^')[0]}"
        return f"{link_label} ({address})" if link_label and link_label != address else address

    text = _MARKUP.sub(shown, text) if "<" in text else text
    for entity, char in _ENTITIES:
        text = text.replace(entity, char)
    return text, mentioned


@hookimpl
def xerj_register_formats(register) -> None:
    register(SlackFormat())
