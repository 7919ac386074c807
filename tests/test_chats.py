"""ChatGPT's and Claude's conversation exports: a document per conversation, as the person read it."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from xerj_core.autoindex.builtin_formats import chats
from xerj_core.autoindex.pipeline import run
from xerj_core.errors import FormatDeclined, FormatError
from xerj_core.testing.formats import AbstractFormatTests

from .test_autoindex import index_of

MTIME = 1_700_000_000_000


def node(key, parent, children, role=None, parts=None, *, content=None, hidden=False, model=None, recipient="all",
         at=None):
    """A ChatGPT mapping node (``role`` None: the root, which holds no message)."""
    if role is None:
        return {"id": key, "message": None, "parent": parent, "children": children}
    metadata = {"is_visually_hidden_from_conversation": True} if hidden else {}
    if model:
        metadata["model_slug"] = model
    return {"id": key, "parent": parent, "children": children, "message": {
        "id": key, "author": {"role": role, "name": None, "metadata": {}}, "create_time": at,
        "content": content or {"content_type": "text", "parts": parts or [""]}, "status": "finished_successfully",
        "metadata": metadata, "recipient": recipient}}


CHATGPT = [
    {"title": "Sourdough timing", "create_time": 1754375326.171142, "update_time": 1754375600.5,
     "conversation_id": "6891a485-3fec-8331-964d-f6bafb8733d3", "id": "6891a485-3fec-8331-964d-f6bafb8733d3",
     "current_node": "a3", "default_model_slug": "gpt-4o", "mapping": {
         "root": node("root", None, ["sys"]),
         "sys": node("sys", "root", ["ctx"], "system", [""], hidden=True),
         # the person's custom instructions, sent with every conversation and hidden from it
         "ctx": node("ctx", "sys", ["u1"], "user", ["I bake on weekends."], hidden=True),
         "u1": node("u1", "ctx", ["a1"], "user", ["How long should the levain rest?"], at=1754375326.0),
         "a1": node("a1", "u1", ["u2", "u2b"], "assistant", ["About 4 hours at 24 C."], model="gpt-4o", at=1.0),
         # the person edited the question: the branch they saw last is u2b's
         "u2": node("u2", "a1", ["a2"], "user", ["And at 18 C?"], at=2.0),
         "a2": node("a2", "u2", [], "assistant", ["Roughly twice as long."], model="gpt-4o", at=3.0),
         "u2b": node("u2b", "a1", ["t1"], "user", ["Here is my starter:", {"content_type": "image_asset_pointer",
                                                                           "asset_pointer": "file-service://x"}],
                     content=None, at=4.0),
         "t1": node("t1", "u2b", ["o1"], "assistant", None, content={"content_type": "code", "text": "search('x')"},
                    recipient="browser", at=5.0),
         "o1": node("o1", "t1", ["r1"], "tool", ["search results"], at=6.0),
         "r1": node("r1", "o1", ["a3"], "assistant", None, content={"content_type": "thoughts", "thoughts": []},
                    at=7.0),
         "a3": node("a3", "r1", [], "assistant", ["It looks active: bubbles \ub9ce\uc774, ready to mix."],
                    model="o3", at=8.0)}},
    {"title": "", "create_time": 1754400000, "update_time": None, "id": "c2", "mapping": {
        "r": node("r", None, ["q"]),
        "q": node("q", "r", ["x"], "user", ["  What is   autolyse?  "]),
        "x": node("x", "q", [], "assistant", ["Flour and water rested before salt."], model="gpt-4o-mini")},
     "current_node": "x"},
]
# multimodal parts and the person's question repeated below need a content of that type
CHATGPT[0]["mapping"]["u2b"]["message"]["content"] = {
    "content_type": "multimodal_text",
    "parts": ["Here is my starter:", {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"}]}

CLAUDE = [
    {"uuid": "28d595a3-5db4-492d-a49b-c8a9b4e1c5e6", "name": "Crumb structure", "created_at": "2025-03-01T10:00:00Z",
     "updated_at": "2025-03-01T10:05:00.123456+00:00", "account": {"uuid": "u"}, "chat_messages": [
         {"uuid": "m1", "sender": "human", "text": "Why is my crumb tight?", "content": [
             {"type": "text", "text": "Why is my crumb tight?"}], "created_at": "2025-03-01T10:00:00Z",
          "attachments": [{"file_name": "log.txt", "extracted_content": "hydration 65%, bulk 3h"}], "files": []},
         {"uuid": "m2", "sender": "assistant", "text": "", "content": [
             {"type": "text", "text": "Low hydration and a short bulk."},
             {"type": "tool_use", "name": "web_search", "input": {"query": "crumb"}},
             {"type": "text", "text": "Try 75%."}], "created_at": "2025-03-01T10:01:00Z", "attachments": []},
         {"uuid": "m3", "sender": "human", "text": "Thanks!", "created_at": "2025-03-01T10:02:00Z"}]},
    {"uuid": "", "name": "", "created_at": "not a date", "chat_messages": []},
]


PROJECTS = [
    {"uuid": "0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e", "name": "Bakery", "description": "Recipes and timings.",
     "prompt_template": "Answer as a baker would, in grams.", "is_private": True,
     "created_at": "2025-02-01T09:00:00Z", "updated_at": "2025-02-02T09:00:00Z", "docs": [
         {"uuid": "d1", "filename": "levain.md", "content": "Feed 1:5:5 twice a day.",
          "created_at": "2025-02-01T09:05:00Z"},
         {"uuid": "d1", "filename": "again.md", "content": "The same id twice."},
         "not a document"]},
    {"uuid": "", "name": "", "description": "", "prompt_template": "", "docs": []},
]


def export(conversations) -> bytes:
    return orjson.dumps(conversations, option=orjson.OPT_INDENT_2)


class TestChatExportConformance(AbstractFormatTests):
    @pytest.fixture
    def fmt(self):
        return chats.ChatExportFormat()

    @pytest.fixture
    def sample_files(self):
        return {"chatgpt/conversations.json": export(CHATGPT), "claude/conversations.json": export(CLAUDE),
                "claude/projects.json": export(PROJECTS)}

    @pytest.fixture
    def bad_files(self):
        return {"x/conversations.json": b"[{\"mapping\": "}

    @pytest.fixture
    def plugin(self):
        return chats


def test_a_chatgpt_conversation_reads_as_the_branch_the_person_saw_last():
    card, first, second = chats.ChatExportFormat().parse("export/conversations.json", export(CHATGPT), MTIME)
    assert card.kind == "file" and card.fields["service"] == "chatgpt" and card.fields["conversations"] == 2
    assert first.doc_id == "export/conversations.json#6891a485-3fec-8331-964d-f6bafb8733d3"
    assert first.title == first.section == "Sourdough timing" and first.kind == "conversation"
    # the edited branch only, the image as [image]; the hidden system message, the browser call, its output and
    # the reasoning are left out
    assert first.text == ("You:\nHow long should the levain rest?\n\nChatGPT:\nAbout 4 hours at 24 C.\n\n"
                          "You:\nHere is my starter:\n\n[image]\n\n"
                          "ChatGPT:\nIt looks active: bubbles \ub9ce\uc774, ready to mix.")
    assert first.fields["messages"] == 4 and first.fields["model"] in ("gpt-4o", "o3")
    assert first.fields["created_ms"] == 1754375326171 and first.fields["updated_ms"] == 1754375600500
    assert first.fields["url"] == "https://chatgpt.com/c/6891a485-3fec-8331-964d-f6bafb8733d3"
    assert first.fields["ordinal"] == 1 and second.fields["ordinal"] == 2
    # no title: the first question names it
    assert second.title == "What is autolyse?" and second.doc_id == "export/conversations.json#c2"
    assert second.fields["model"] == "gpt-4o-mini" and "updated_ms" not in second.fields


def test_a_chatgpt_conversation_without_a_current_node_reads_every_message_in_order():
    conversation = {**CHATGPT[1], "current_node": None}
    conversation["mapping"] = {**conversation["mapping"]}
    conversation["mapping"]["q"] = node("q", "r", ["x"], "user", ["first"], at=1.0)
    conversation["mapping"]["x"] = node("x", "q", [], "assistant", ["second"], at=2.0)
    _card, doc, again = chats.ChatExportFormat().parse("conversations.json", export([conversation] * 2), MTIME)
    assert doc.text == again.text == "You:\nfirst\n\nChatGPT:\nsecond"
    # an id seen before names nothing twice: the second is named by its place
    assert (doc.doc_id, again.doc_id) == ("conversations.json#c2", "conversations.json#conversation-2")


def test_a_claude_conversation_keeps_its_text_blocks_and_the_files_given():
    card, first, second = chats.ChatExportFormat().parse("conversations.json", export(CLAUDE), MTIME)
    assert card.fields == {**card.fields, "service": "claude", "conversations": 2}
    assert first.doc_id == "conversations.json#28d595a3-5db4-492d-a49b-c8a9b4e1c5e6"
    assert first.title == "Crumb structure"
    assert first.text == ("You:\nWhy is my crumb tight?\n\n[log.txt]\nhydration 65%, bulk 3h\n\n"
                          "Claude:\nLow hydration and a short bulk.\n\nTry 75%.\n\nYou:\nThanks!")
    assert first.fields["created_ms"] == 1740823200000 and first.fields["updated_ms"] == 1740823500123
    assert first.fields["url"] == "https://claude.ai/chat/28d595a3-5db4-492d-a49b-c8a9b4e1c5e6"
    assert first.fields["messages"] == 3 and "model" not in first.fields
    # no id, no title, no messages: named by its place, titled as untitled, its bad date left out
    assert second.doc_id == "conversations.json#conversation-2" and second.title == chats.UNTITLED
    assert second.text == "" and "created_ms" not in second.fields and "url" not in second.fields


@pytest.mark.parametrize(("value", "ms"), [(1754375326.5, 1754375326500), (0, 0), (-1, None), (1e308, None),
                                           (True, None), ("2025-03-01T10:00:00Z", 1740823200000),
                                           ("9999-12-31T23:59:59+00:00", 253402300799000), ("0001-01-01", None),
                                           ("2025-13-01", None), ("", None), (None, None)])
def test_a_conversations_instants_are_read_in_a_sane_range(value, ms):
    assert chats._epoch_ms(value) == ms


def test_claude_projects_keep_their_instructions_and_the_documents_given_them():
    card, bakery, levain, again, untitled = chats.ChatExportFormat().parse(
        "claude/projects.json", export(PROJECTS), MTIME)
    assert card.fields["service"] == "claude" and card.fields["projects"] == 2
    assert bakery.doc_id == "claude/projects.json#0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e" and bakery.kind == "project"
    assert bakery.title == "Bakery" and bakery.text == "Recipes and timings.\n\nAnswer as a baker would, in grams."
    assert bakery.fields["url"] == "https://claude.ai/project/0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e"
    assert bakery.fields["created_ms"] == 1738400400000
    assert (levain.doc_id, levain.kind, levain.title, levain.text) == (
        bakery.doc_id + "/d1", "knowledge", "levain.md", "Feed 1:5:5 twice a day.")
    assert levain.fields["project"] == bakery.doc_id
    assert again.doc_id == bakery.doc_id + "/document-2"  # an id seen before in the project names nothing twice
    assert untitled.doc_id == "claude/projects.json#project-2" and untitled.title == chats.UNTITLED_PROJECT
    assert [doc.fields["ordinal"] for doc in (bakery, levain, again, untitled)] == [1, 2, 3, 4]
    with pytest.raises(FormatDeclined):
        chats.ChatExportFormat().parse("projects.json", b'[{"name": "a gulp task list"}]', MTIME)
    assert chats.ChatExportFormat().accepts("claude/projects.json", b"[{")


def test_fields_of_another_type_than_the_exports_are_read_as_empty():
    claude = [{"uuid": "u", "name": "n", "chat_messages": [
        {"sender": "human", "text": "asked", "content": 5, "attachments": "x"}, 7]}]
    _card, doc = chats.ChatExportFormat().parse("conversations.json", export(claude), MTIME)
    assert doc.text == "You:\nasked"
    chatgpt = [{"id": "c", "current_node": "m", "mapping": {"m": node("m", None, [], "user", None,
                                                                      content={"content_type": "text", "parts": 3})}}]
    _card, doc = chats.ChatExportFormat().parse("conversations.json", export(chatgpt), MTIME)
    assert doc.text == "" and doc.title == chats.UNTITLED


def test_another_programs_conversations_json_is_passed_by_and_bad_json_refused():
    fmt = chats.ChatExportFormat()
    for data in (b'[{"id": 1, "messages": []}]', b"[]", b'[{"mapping": {}}, {"chat_messages": []}]'):
        with pytest.raises(FormatDeclined) as declined:
            fmt.parse("conversations.json", data, MTIME)
        assert declined.value.kind == "no_format"
    with pytest.raises(FormatError, match="not JSON"):
        fmt.parse("conversations.json", b"[{", MTIME)
    assert fmt.accepts("a/conversations.json", b' \n[{"title"') and not fmt.accepts("a/conversations.json", b"{}")
    assert not fmt.accepts("a/chats.json", b"[")


def test_exports_beside_notes_are_searchable_conversations(engine, tmp_path):
    folder = tmp_path / "brain"
    (folder / "chatgpt").mkdir(parents=True)
    (folder / "claude").mkdir()
    (folder / "other").mkdir()
    (folder / "chatgpt" / "conversations.json").write_bytes(export(CHATGPT))
    (folder / "claude" / "conversations.json").write_bytes(export(CLAUDE))
    (folder / "other" / "conversations.json").write_bytes(b'[{"id": 1}]')
    (folder / "levain.md").write_text("# Levain\n\nFeed it twice a day.\n")
    summary = run(engine, folder, brain="me")
    assert summary.files_indexed == 3 and not summary.files_failed
    assert [(s["path"], s["kind"]) for s in summary.files_skipped] == [("other/conversations.json", "no_format")]
    index = index_of(engine, "me", "ax-chats")
    found = engine.search.search(index, {"query": {"match": {"text": "hydration"}}})
    assert [hit["_id"] for hit in found["hits"]["hits"]] == [
        "claude/conversations.json#28d595a3-5db4-492d-a49b-c8a9b4e1c5e6"]
    assert engine.store.get(index, "chatgpt/conversations.json#c2")[0]["title"] == "What is autolyse?"
    # the conversations follow their export's card, in order
    assert summary.edges_by_type.get("sequence", 0) >= 4


# The keys the format reads, so that drawn values land where it looks.
KEYS = ["mapping", "current_node", "message", "parent", "children", "author", "role", "content", "content_type",
        "parts", "text", "metadata", "recipient", "model_slug", "is_visually_hidden_from_conversation", "title", "id",
        "conversation_id", "create_time", "update_time", "chat_messages", "sender", "type", "attachments",
        "extracted_content", "file_name", "uuid", "name", "created_at", "updated_at", "docs", "prompt_template",
        "description", "filename", "content"]
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["user", "assistant", "human", "tool", "all", "text", "multimodal_text", "code", "a", "",
                       "2025-03-01T10:00:00Z"]) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.sampled_from(KEYS), children, max_size=6),
    max_leaves=25)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6).map(
    lambda c: {**c, "mapping": c.get("mapping") if isinstance(c.get("mapping"), dict) else {},
               "docs": c.get("docs") if isinstance(c.get("docs"), list) else [], "prompt_template": c.get("text")}),
    min_size=1,
    max_size=3) | st.lists(VALUES, max_size=3), st.sampled_from(["conversations.json", "projects.json"]))
def test_any_export_shaped_json_parses_or_is_passed_by(conversations, name):
    try:
        docs = chats.ChatExportFormat().parse(name, orjson.dumps(conversations), MTIME)
    except FormatDeclined as exc:
        assert exc.kind == "no_format"
    else:
        assert docs[0].fields.get("conversations", docs[0].fields.get("projects")) <= len(docs) - 1
        assert len({doc.doc_id for doc in docs}) == len(docs)
