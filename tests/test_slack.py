"""Slack workspace exports: a channel's day, a channel, a person, each a document; threads and mentions followed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xerj_core.autoindex.builtin_formats import slack
from xerj_core.autoindex.pipeline import run
from xerj_core.errors import FormatDeclined
from xerj_core.testing.detectors import AbstractDetectorTests, parse_files, run_detectors
from xerj_core.testing.formats import AbstractFormatTests
from xerj_detectors import slackthread

from .test_autoindex import index_of

MTIME = 1_700_000_000_000
ANA = {"real_name": "Ana Ruiz", "display_name": "ana"}
BO = {"real_name": "Bo Chen", "display_name": "bo"}

# An export as Slack's documentation lays it out: users.json, channels.json, a folder per channel, a file per day.
USERS = [
    {"id": "U01ANA0001", "name": "ana", "real_name": "Ana Ruiz", "profile": {**ANA, "title": "Studio lead"}},
    {"id": "U02BO00002", "name": "bo", "profile": BO},
    {"id": "U03OLD0003", "name": "old", "deleted": True, "profile": {"real_name": "Former Member"}},
    {"id": "B04BOT0004", "name": "kilnbot", "is_bot": True, "profile": {"real_name": "Kiln Bot"}},
]
CHANNELS = [
    {"id": "C01GEN0001", "name": "general", "created": 1704067200, "members": ["U01ANA0001", "U02BO00002"],
     "purpose": {"value": "Studio news"}, "topic": {"value": "Firing schedule in the pinned post"}},
    {"id": "C02KLN0002", "name": "kiln", "created": 1704153600, "is_archived": True, "members": [],
     "purpose": {"value": ""}, "topic": {"value": ""}},
]
DAY_ONE = [
    {"type": "message", "subtype": "channel_join", "ts": "1705309200.000100", "user": "U02BO00002",
     "text": "<@U02BO00002> has joined the channel", "user_profile": BO},
    {"type": "message", "ts": "1705309260.000200", "user": "U01ANA0001", "user_profile": ANA,
     "text": "The kiln schedule for next week is up: <https://studio.example/kiln|kiln calendar>",
     "thread_ts": "1705309260.000200", "reply_count": 3},
    {"type": "message", "ts": "1705309320.000300", "user": "U02BO00002", "user_profile": BO,
     "text": "Thanks <@U01ANA0001>, can we fire cone 6 on Thursday?", "thread_ts": "1705309260.000200",
     "parent_user_id": "U01ANA0001"},
    {"type": "message", "ts": "1705309380.000400", "user": "U01ANA0001", "user_profile": ANA,
     "text": "Glaze notes attached &amp; <!here> please read",
     "files": [{"id": "F1", "name": "glazes.pdf", "title": "Glaze notes"}]},
]
DAY_TWO = [
    {"type": "message", "ts": "1705395600.000100", "user": "U01ANA0001", "user_profile": ANA,
     "text": "Yes, Thursday works. Loading starts at 8.", "thread_ts": "1705309260.000200",
     "parent_user_id": "U01ANA0001"},
    {"type": "message", "ts": "1705395700.000200", "user": "U02BO00002", "user_profile": BO,
     "text": "Moving to <#C02KLN0002|kiln> for the loading plan, cc <@U03OLD0003>"},
]


def export(value) -> bytes:
    return json.dumps(value, indent=4).encode()


FILES = {"studio/users.json": export(USERS), "studio/channels.json": export(CHANNELS),
         "studio/general/2024-01-15.json": export(DAY_ONE), "studio/general/2024-01-16.json": export(DAY_TWO)}


class TestSlackConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return slack.SlackFormat()

    @pytest.fixture
    def sample_files(self):
        return FILES

    @pytest.fixture
    def bad_files(self):
        return {"studio/general/2024-01-17.json": b'[{"type": "message", "ts": "1705395600.000100", "text": '}

    @pytest.fixture
    def plugin(self):
        return slack


class TestSlackthreadConformance(AbstractDetectorTests):
    @pytest.fixture
    def detector(self):
        return slackthread.SlackthreadDetector()

    @pytest.fixture
    def corpus_files(self):
        return parse_files(FILES)


def test_a_day_reads_as_slack_shows_it():
    (day,) = slack.SlackFormat().parse("studio/general/2024-01-15.json", FILES["studio/general/2024-01-15.json"],
                                       MTIME)
    assert day.doc_id == "studio/general/2024-01-15.json" and day.kind == "day"
    assert (day.title, day.section) == ("#general", "2024-01-15")
    assert day.text.splitlines() == [  # the join notice left out, the reply indented under its thread
        "Ana Ruiz: The kiln schedule for next week is up: kiln calendar (https://studio.example/kiln)",
        "  Bo Chen: Thanks @Ana Ruiz, can we fire cone 6 on Thursday?",
        "Ana Ruiz: Glaze notes attached & @here please read [file glazes.pdf]"]
    assert day.fields["people"] == ["Ana Ruiz", "Bo Chen"] and day.fields["messages"] == 3
    assert day.fields["mentions"] == ["U01ANA0001"] and day.fields["threads"] == ["1705309260.000200"]
    assert "replies_to" not in day.fields  # its replies' thread began the same day
    (after,) = slack.SlackFormat().parse("studio/general/2024-01-16.json", FILES["studio/general/2024-01-16.json"],
                                         MTIME)
    (reply,) = after.fields["replies_to"]
    assert reply["thread"] == "1705309260.000200"
    assert after.text.encode()[reply["offset"]:].startswith(b"  Ana Ruiz: Yes, Thursday works.")
    assert after.text.splitlines()[1] == "Bo Chen: Moving to #kiln for the loading plan, cc @U03OLD0003"


def test_people_and_channels_are_documents_of_their_own():
    card, *people = slack.SlackFormat().parse("studio/users.json", FILES["studio/users.json"], MTIME)
    assert card.fields["records"] == 4 and [p.title for p in people] == ["Ana Ruiz", "Bo Chen", "Former Member",
                                                                        "Kiln Bot"]
    assert people[0].doc_id == "studio/users.json#U01ANA0001" and people[0].text == "Ana Ruiz\n@ana\nStudio lead"
    assert people[2].fields["deleted"] is True and people[3].fields["is_bot"] is True
    card, general, kiln = slack.SlackFormat().parse("studio/channels.json", FILES["studio/channels.json"], MTIME)
    assert (general.title, general.text, general.fields["members"]) == (
        "#general", "Studio news\nFiring schedule in the pinned post", 2)
    assert general.fields["created_ms"] == 1704067200000 and kiln.fields["archived"] is True


def test_only_parts_of_an_export_are_accepted():
    fmt = slack.SlackFormat()
    for path, data in FILES.items():
        assert fmt.accepts(path, data[:1024]), path
    assert not fmt.accepts("2024-01-15.json", FILES["studio/general/2024-01-15.json"])  # a day sits in its channel
    assert not fmt.accepts("logs/2024-01-15.json", b'[{"level": "info", "msg": "started"}]')
    assert not fmt.accepts("app/users.json", b'[{"id": 1, "email": "a@example.org"}]')
    assert not fmt.accepts("studio/general/2024-01-15.txt", FILES["studio/general/2024-01-15.json"])
    with pytest.raises(FormatDeclined, match="not part of a Slack export"):
        fmt.parse("studio/users.json", b'{"id": "U01ANA0001"}', MTIME)


def test_slackthread_follows_threads_across_days_and_mentions_to_people():
    edges = sorted((e.type, e.src, e.dst, e.evidence.quote)
                   for e in run_detectors([slackthread.SlackthreadDetector()], parse_files(FILES)).edges)
    assert edges == [
        ("mention", "studio/general/2024-01-15.json", "studio/users.json#U01ANA0001",
         "Bo Chen: Thanks @Ana Ruiz, can we fire cone 6 on Thursday?"),
        ("mention", "studio/general/2024-01-16.json", "studio/users.json#U03OLD0003",
         "Bo Chen: Moving to #kiln for the loading plan, cc @U03OLD0003"),
        ("thread_reply", "studio/general/2024-01-16.json", "studio/general/2024-01-15.json",
         "Ana Ruiz: Yes, Thursday works. Loading starts at 8."),
    ]
    # another export's people and channels are its own: the same ids elsewhere link nothing here
    other = {f"other/{path.split('/', 1)[1]}": data for path, data in FILES.items() if "users" not in path}
    found = run_detectors([slackthread.SlackthreadDetector()], parse_files({**FILES, **other})).edges
    assert sorted((e.src, e.dst) for e in found if e.src.startswith("other/")) == [
        ("other/general/2024-01-16.json", "other/general/2024-01-15.json")]


def test_a_slack_export_is_searchable_and_its_threads_linked(engine, tmp_path):
    for path, data in FILES.items():
        target = tmp_path / "exports" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    summary = run(engine, tmp_path / "exports", brain="slack")
    assert summary.files_indexed == 4 and not summary.files_failed and not summary.files_skipped
    assert summary.edges_by_type["thread_reply"] == 1 and summary.edges_by_type["mention"] == 2
    index = index_of(engine, "slack", "ax-chats")
    hits = engine.search.search(index, {"query": {"match_phrase": {"text": "cone 6"}}})["hits"]["hits"]
    assert [hit["_id"] for hit in hits] == ["studio/general/2024-01-15.json"]
    ego = engine.graph.ego("slack", {"node": "studio/users.json#U01ANA0001", "hops": 1, "types": "mention"})
    assert [edge["src"] for edge in ego["edges"]] == ["studio/general/2024-01-15.json"]
    assert Path(tmp_path / "exports").is_dir()
