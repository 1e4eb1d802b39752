"""``tessera chat`` as a person uses it: blank lines in piped questions, and on a real terminal (a pty) a question
longer than the terminal's 4,095-character line, Ctrl-C during an answer (that answer stops, the chat goes on),
Ctrl-D. The model is the local fault server (``paced``: an answer written a word at a time), the retrieval real
(BM25 over the bundled sample)."""

from __future__ import annotations

import functools
import json
import os

import pytest

from tests.flows.test_chat_command import SPEC
from tests.flows.test_cli import REPO, SCRIPT, tessera_in_process


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "small_rag.yaml"
    path.write_text(SPEC)
    return path


@pytest.mark.slow  # the first model call of the process imports litellm (5 s)
def test_blank_lines_in_piped_questions_are_skipped_not_the_end(fault_models, spec, tmp_path, monkeypatch, capsys):
    """A file of questions with a blank line in it ended the chat there, exit 0, the questions after it unasked."""
    tessera = functools.partial(tessera_in_process, monkeypatch, capsys)
    questions = "Which insects make honey?\n\n   \nHow do they make it?\n"
    proc = tessera("chat", str(spec), "--model", "fault-ok", "--no-cache", "--json", home=tmp_path / "home",
                   stdin=questions)
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [a["question"] for a in answers] == ["Which insects make honey?", "How do they make it?"], proc.stdout


def chat_on_a_terminal(spec, tmp_path, *args: str):
    import pexpect

    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home")}
    env.pop("TESSERA_DEBUG", None)
    child = pexpect.spawn(str(SCRIPT), ["chat", str(spec), "--no-cache", *args], cwd=str(REPO), env=env,
                          encoding="utf-8", timeout=90, dimensions=(40, 200))
    child.expect("you> ")
    return child


@pytest.mark.slow  # two chats in processes of their own, on a pty
def test_on_a_terminal_ctrl_c_stops_the_answer_not_the_chat_and_a_long_question_is_read_whole(fault_models, spec,
                                                                                               tmp_path):
    import pexpect

    fault_models.pace = 0.3  # the answer's six words over two seconds
    child = chat_on_a_terminal(spec, tmp_path, "--model", "fault-paced")
    child.sendline("Which insects make honey?")
    child.expect(r"answer\S*: Honey")  # being written
    child.sendintr()
    child.expect("answer stopped \\(Ctrl-C\\)")  # it ended the whole chat with status 130
    child.expect("you> ")
    child.sendline("How do they make it?")
    child.expect(r"answer\S*: Honey bees make honey \[1\]\.")
    child.expect("you> ")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    # the stopped turn is not in the conversation the next question was asked with
    assert "Which insects" not in json.dumps(fault_models.bodies[-1]["messages"])
    assert fault_models.left["paced"] == 1  # the stopped answer's stream was left, not read to its end

    question = "honey " * 1000 + "END"  # 6,003 characters: the terminal's line discipline kept 4,095
    child = chat_on_a_terminal(spec, tmp_path, "--model", "fault-ok", "--json")
    for start in range(0, len(question), 500):  # as a paste arrives
        child.send(question[start:start + 500])
    child.send("\r")
    child.expect(r'\{"turn": 1.*\}\r\n')
    assert json.loads(child.after)["question"] == question
    child.sendintr()  # at the prompt, Ctrl-C ends the chat
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
