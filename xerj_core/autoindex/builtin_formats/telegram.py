"""Telegram exports (``result.json``): a document per chat and month, its messages as they were written.

Telegram Desktop exports as JSON either one chat ("Export chat history": an
object with the chat's ``name``, ``type``, ``id`` and ``messages``) or the
whole account (Settings, Advanced, "Export Telegram data": ``chats.list`` and
``left_chats.list`` of such chats, beside ``personal_information`` and the
rest). A message has ``id``, ``type`` (``message``, or ``service`` for a join,
a pin, a call), ``date`` (local time) and ``date_unixtime``, ``from``, and
``text``: a string, or a list of strings and entities (``{"type": "bold",
"text": ...}``, a link with its ``href``); a media message names its
``media_type`` or ``photo`` and ``file_name``, a sticker its emoji, a poll its
question, a forwarded one ``forwarded_from``.

The file's card (kind ``file``, titled by the chat of a one-chat export)
counts the ``chats`` and ``messages`` kept.
Each chat is a document per month it has messages in (kind ``chat``,
``{path}#{chat id}/{YYYY-MM}``), titled by the chat's name ("Saved Messages"
for the account's own notes to itself), its section the month: its text is
its messages in order, a line each, ``Name: text`` (a media message's
``[photo]``, ``[file report.pdf]``; ``(forwarded from X)`` after a forwarded
one's sender). Fields: ``chat_id``, ``chat_type``, ``month``, ``messages``,
``people`` (who wrote), ``first_ms`` / ``last_ms``. Service messages are left
out. A month bounds a document: a chat of ten years is 120 documents, not one.

A file is taken for an export by Telegram's keys in its first kilobyte (a chat
``type`` of Telegram's, ``date_unixtime``, ``personal_information``); one
that reads so but holds no chat is passed by as ``no_format``, and one that
is not JSON is refused.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Iterator

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import document, json_head, load_json
from xerj_core.autoindex.formats import NO_FORMAT, FormatDeclined
from xerj_core.model import SourceDocument

# The start of either export: the account's (``about``, ``personal_information``) or one chat's (its name and a
# type of Telegram's, or its messages)
_HEAD = re.compile(rb'^\s*\{\s*"(?:about|personal_information|name|type|id|messages)"\s*:')
_TELEGRAM = re.compile(rb'"(?:personal_information|chats|left_chats)"\s*:|"type"\s*:\s*"(?:personal_chat|bot_chat|'
                       rb'saved_messages|private_group|private_supergroup|public_supergroup|private_channel|'
                       rb'public_channel|replies)"|"date_unixtime"\s*:')
SAVED_MESSAGES = "Saved Messages"
_MEDIA = {"photo": "photo", "video_file": "video", "voice_message": "voice message", "audio_file": "audio",
          "animation": "animation", "video_message": "video message", "sticker": "sticker"}


class TelegramFormat:
    """Telegram Desktop's JSON exports into ``ax-chats``: a card, a document per chat and month."""

    name = "telegram"
    dataset = "ax-chats"
    priority = 20
    version = 1

    def accepts(self, rel_path: str, head: bytes) -> bool:
        head = json_head(rel_path, head)
        return head is not None and _HEAD.match(head) is not None and _TELEGRAM.search(head) is not None

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        export = load_json(data, rel_path)
        chats = list(_chats(export))
        if not chats:  # another program's JSON that began as one does: passed by, not failed
            raise FormatDeclined("not a Telegram export: no chat with messages in it", kind=NO_FORMAT)
        docs: list[SourceDocument] = []
        for chat in chats:
            docs += self._chat(rel_path, mtime_ms, chat, len(docs) + 1)
        # one chat's export is named by the chat; the account's is the account's
        title = docs[0].title if isinstance(export.get("messages"), list) and docs else "Telegram export"
        card = document(self, rel_path, mtime_ms, doc_id=rel_path, title=title, text="", section="", kind="file",
                        chats=len(chats), messages=sum(doc.fields["messages"] for doc in docs))
        return [card, *docs]

    def _chat(self, rel_path: str, mtime_ms: int, chat: dict[str, Any], ordinal: int) -> list[SourceDocument]:
        kind = chat.get("type") if isinstance(chat.get("type"), str) else None
        title = _text(chat.get("name")) or (SAVED_MESSAGES if kind == "saved_messages" else "") or "Untitled chat"
        chat_id = chat.get("id") if isinstance(chat.get("id"), (int, str)) else f"chat-{ordinal}"
        months: dict[str, list[dict[str, Any]]] = {}
        for message in chat["messages"]:
            if isinstance(message, dict) and message.get("type", "message") == "message":
                months.setdefault(_month(message), []).append(message)
        docs = []
        for n, (month, messages) in enumerate(months.items()):
            lines = [line for line in map(_line, messages) if line]
            instants = [at for at in map(_instant, messages) if at is not None]
            people = list(dict.fromkeys(name for m in messages if (name := _text(m.get("from")))))
            docs.append(document(
                self, rel_path, mtime_ms, doc_id=f"{rel_path}#{chat_id}/{month}", title=title, text="\n".join(lines),
                section=month, kind="chat", ordinal=ordinal + n, chat_id=str(chat_id), chat_type=kind, month=month,
                messages=len(lines), people=people or None, first_ms=min(instants, default=None),
                last_ms=max(instants, default=None)))
        return docs


def _chats(export: Any) -> Iterator[dict[str, Any]]:
    """The chats of either export that hold a list of messages."""
    if not isinstance(export, dict):
        return
    if isinstance(export.get("messages"), list):
        yield export
        return
    for key in ("chats", "left_chats"):
        listed = export.get(key)
        for chat in listed.get("list") if isinstance(listed, dict) and isinstance(listed.get("list"), list) else ():
            if isinstance(chat, dict) and isinstance(chat.get("messages"), list):
                yield chat


def _text(value: Any) -> str:
    """A message's ``text`` as it reads: a string, or its pieces (strings and entities' texts) joined."""
    if isinstance(value, list):
        value = "".join(piece if isinstance(piece, str) else piece["text"] if isinstance(piece, dict)
                        and isinstance(piece.get("text"), str) else "" for piece in value)
    return value.strip() if isinstance(value, str) else ""


def _line(message: dict[str, Any]) -> str:
    text = _text(message.get("text"))
    media = _media(message)
    if media:
        text = f"{media} {text}" if text else media
    if not text:
        return ""
    sender = _text(message.get("from")) or _text(message.get("author")) or "Someone"
    forwarded = _text(message.get("forwarded_from"))
    return f"{sender} (forwarded from {forwarded}): {text}" if forwarded else f"{sender}: {text}"


def _media(message: dict[str, Any]) -> str:
    """What a message holds besides its text, as a bracketed word (``[photo]``, ``[file report.pdf]``)."""
    if isinstance(message.get("poll"), dict):
        return f"[poll {_text(message['poll'].get('question'))}]"
    if message.get("media_type") == "sticker":
        return _text(message.get("sticker_emoji")) or "[sticker]"
    if "photo" in message:
        return "[photo]"
    kind = _MEDIA.get(message.get("media_type")) if isinstance(message.get("media_type"), str) else None
    named = _text(message.get("file_name"))
    if kind:
        return f"[{kind} {named}]" if named else f"[{kind}]"
    return f"[file {named}]" if named or "file" in message else ""


def _month(message: dict[str, Any]) -> str:
    date = message.get("date")
    if isinstance(date, str) and re.match(r"\d{4}-\d{2}", date):
        return date[:7]
    at = _instant(message)
    try:
        return datetime.fromtimestamp(at / 1000, timezone.utc).strftime("%Y-%m") if at is not None else "undated"
    except (OverflowError, OSError, ValueError):  # an instant past what a date can say
        return "undated"


def _instant(message: dict[str, Any]) -> int | None:
    value = message.get("date_unixtime")
    if isinstance(value, str) and value.isdecimal():
        return int(value) * 1000
    return value * 1000 if isinstance(value, int) and not isinstance(value, bool) else None


@hookimpl
def xerj_register_formats(register) -> None:
    register(TelegramFormat())
