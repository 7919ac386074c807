"""Telegram Desktop's JSON exports: a document per chat and month, found by what was written in it."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from xerj_core.autoindex.builtin_formats import telegram
from xerj_core.autoindex.pipeline import run
from xerj_core.errors import FormatDeclined, FormatError
from xerj_core.testing.formats import AbstractFormatTests

from .test_autoindex import index_of

MTIME = 1_700_000_000_000


def message(n, date, sender, text, **extra):
    """A message as Telegram Desktop writes it (``date`` local, ``date_unixtime`` a string of seconds)."""
    at = int(__import__("datetime").datetime.fromisoformat(date).timestamp())
    return {"id": n, "type": "message", "date": date, "date_unixtime": str(at), "from": sender,
            "from_id": f"user{abs(hash(sender)) % 1000}", "text": text, **extra}


# One chat's export ("Export chat history"), as the schema Telegram documents has it: text as a string or as a
# list of plain strings and entities, media, a forward, a poll, a sticker and a service message.
ONE_CHAT = {
    "name": "Mira Kovač", "type": "personal_chat", "id": 4815162342,
    "messages": [
        {"id": 1, "type": "service", "date": "2024-01-30T09:00:00", "date_unixtime": "1706605200",
         "actor": "Mira Kovač", "action": "phone_call", "text": ""},
        {"id": 9, "type": "service", "date": "2024-01-30T09:00:30", "date_unixtime": "1706605230",
         "actor": "Mira Kovač", "action": "pin_message", "message_id": 2, "text": "pinned the kiln schedule"},
        message(2, "2024-01-30T09:01:00", "Mira Kovač", "The kiln reaches cone 6 in about nine hours."),
        message(3, "2024-01-30T09:02:10", "Ana", [{"type": "plain", "text": "Then glaze on "},
                                                  {"type": "bold", "text": "Thursday"}, "."]),
        message(4, "2024-01-31T18:40:00", "Mira Kovač", "", photo="photos/photo_1@31-01-2024_18-40-00.jpg",
                width=1280, height=960),
        message(5, "2024-02-02T08:15:00", "Ana", "Firing log attached", file="files/log.pdf",
                file_name="firing-log.pdf", mime_type="application/pdf"),
        message(6, "2024-02-03T10:00:00", "Mira Kovač", "Old notes on celadon",
                forwarded_from="Studio Channel"),
        message(7, "2024-02-03T10:05:00", "Ana", "", poll={"question": "Which clay body?", "answers": []}),
        message(8, "2024-02-03T10:06:00", "Mira Kovač", "", media_type="sticker", sticker_emoji="👍"),
    ],
}

# The account's export: personal information, contacts, and chats (its own notes among them) and chats left.
ACCOUNT = {
    "about": "Here is the data you requested. Remember: Telegram is ad free...",
    "personal_information": {"user_id": 1, "first_name": "Ana", "last_name": "", "phone_number": "+0 000"},
    "contacts": {"about": "This is your contact list.", "list": []},
    "chats": {"about": "This page lists all chats from this export.", "list": [
        {"type": "saved_messages", "id": 1, "messages": [
            message(10, "2023-11-05T21:30:00", "Ana", "Idea: a tile series glazed with wood ash"),
            message(11, "2023-12-01T07:00:00", "Ana", [{"type": "link", "text": "https://example.org/ash-glaze"}]),
        ]},
        ONE_CHAT,
    ]},
    "left_chats": {"about": "Chats you left.", "list": [
        {"name": "Pottery swap", "type": "public_supergroup", "id": 77, "messages": [
            message(20, "2022-06-01T12:00:00", "Lee", "Trading two bags of porcelain for stoneware."),
        ]},
    ]},
}


def export(value) -> bytes:
    return json.dumps(value, ensure_ascii=False, indent=1).encode()


class TestTelegramConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return telegram.TelegramFormat()

    @pytest.fixture
    def sample_files(self):
        return {"ChatExport_2024-02-04/result.json": export(ONE_CHAT), "DataExport/result.json": export(ACCOUNT)}

    @pytest.fixture
    def bad_files(self):
        return {"result.json": b'{"name": "x", "type": "personal_chat", "messages": [{"id": '}

    @pytest.fixture
    def plugin(self):
        return telegram


def test_a_chat_is_a_document_per_month_its_messages_a_line_each():
    card, january, february = telegram.TelegramFormat().parse("chat/result.json", export(ONE_CHAT), MTIME)
    assert card.kind == "file" and card.title == "Mira Kovač" and card.fields["chats"] == 1
    assert card.fields["messages"] == 7  # the service message left out
    assert january.doc_id == "chat/result.json#4815162342/2024-01" and january.section == "2024-01"
    assert january.title == "Mira Kovač" and january.kind == "chat"
    assert january.text.splitlines() == [
        "Mira Kovač: The kiln reaches cone 6 in about nine hours.", "Ana: Then glaze on Thursday.",
        "Mira Kovač: [photo]"]
    assert february.text.splitlines() == [
        "Ana: [file firing-log.pdf] Firing log attached",
        "Mira Kovač (forwarded from Studio Channel): Old notes on celadon",
        "Ana: [poll Which clay body?]", "Mira Kovač: 👍"]
    assert january.fields["people"] == ["Mira Kovač", "Ana"] and january.fields["chat_type"] == "personal_chat"
    assert january.fields["first_ms"] < january.fields["last_ms"] < february.fields["first_ms"]


def test_the_accounts_export_holds_every_chat_its_own_notes_and_those_left():
    card, *docs = telegram.TelegramFormat().parse("export/result.json", export(ACCOUNT), MTIME)
    assert card.title == "Telegram export" and card.fields["chats"] == 3
    assert [(doc.title, doc.section) for doc in docs] == [
        ("Saved Messages", "2023-11"), ("Saved Messages", "2023-12"), ("Mira Kovač", "2024-01"),
        ("Mira Kovač", "2024-02"), ("Pottery swap", "2022-06")]
    assert docs[1].text == "Ana: https://example.org/ash-glaze"
    assert len({doc.doc_id for doc in docs}) == 5


def test_only_telegram_exports_are_accepted():
    fmt = telegram.TelegramFormat()
    assert fmt.accepts("result.json", export(ONE_CHAT)[:1024])
    assert fmt.accepts("renamed.json", export(ACCOUNT)[:1024])
    assert fmt.accepts("mira.json", orjson.dumps(ONE_CHAT)[:1024])
    assert not fmt.accepts("package.json", b'{"name": "x", "version": "1.0.0", "type": "module"}')
    assert not fmt.accepts("conversations.json", b'[{"title": "a chat", "mapping": {}}]')
    assert not fmt.accepts("result.txt", export(ONE_CHAT)[:1024])
    assert not fmt.accepts("result.json", b'{"name": "test run", "passed": 3, "failed": 0}')  # a common name
    with pytest.raises(FormatDeclined, match="not a Telegram export"):
        fmt.parse("result.json", b'{"name": "x", "type": "personal_chat"}', MTIME)


_VALUE = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=6),
                   st.lists(st.one_of(st.text(max_size=4), st.fixed_dictionaries({"type": st.just("bold"),
                                                                                   "text": st.text(max_size=4)})),
                            max_size=3))
_MESSAGE = st.fixed_dictionaries({}, optional={key: _VALUE for key in (
    "id", "type", "date", "date_unixtime", "from", "text", "photo", "file_name", "media_type", "sticker_emoji",
    "forwarded_from", "poll")})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries({"messages": st.lists(st.one_of(_MESSAGE, _VALUE), max_size=5)},
                             optional={"name": _VALUE, "type": _VALUE, "id": _VALUE}))
@example({"messages": [{"date_unixtime": "\u00b2"}]})  # a superscript two is a digit to str.isdigit, not to int
def test_any_chat_shape_is_read_or_refused(chat):
    try:
        docs = telegram.TelegramFormat().parse("result.json", json.dumps(chat).encode(), MTIME)
    except (FormatError, FormatDeclined):
        return
    assert docs[0].fields["messages"] == sum(doc.fields["messages"] for doc in docs[1:])


def test_a_telegram_export_is_searchable_by_what_was_written(engine, tmp_path):
    folder = tmp_path / "telegram"
    (folder / "DataExport_2024-02-04").mkdir(parents=True)
    (folder / "DataExport_2024-02-04" / "result.json").write_bytes(export(ACCOUNT))
    summary = run(engine, folder, brain="tg")
    assert summary.files_indexed == 1 and not summary.files_failed and not summary.files_skipped
    index = index_of(engine, "tg", "ax-chats")
    hits = engine.search.search(index, {"query": {"match": {"text": "wood ash tiles"}}})["hits"]["hits"]
    assert hits[0]["_id"] == "DataExport_2024-02-04/result.json#1/2023-11"
    found = engine.search.search(index, {"query": {"term": {"people.keyword": "Lee"}}})["hits"]["hits"]
    assert [hit["_id"] for hit in found] == ["DataExport_2024-02-04/result.json#77/2022-06"]
