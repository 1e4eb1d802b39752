"""``tessera chat``: questions a line on stdin, answered by a flow with its sources (streamed as written); a
follow-up searched for with the conversation before it; /new starts over; a flow that does not answer is refused.
The model is the local fault server (its reply is known), the retrieval real (BM25 over the bundled sample). One
whole chat runs the script in a process of their own; the others call ``flows.commands.main`` in-process (the
``tessera`` fixture: the same arguments, streams and exit status, without a process's imports each)."""

from __future__ import annotations

import functools
import io
import json
import sys

import pytest

from tests.flows.test_cli import assert_one_line_error, tessera_in_process, tessera_process
from tests.text_checks import TRACEBACK

SPEC = """name: small_rag
steps:
  standalone: {op: query.contextualize}
  bm25:       {op: retrieve.corpus_bm25, params: {k: 3}}
  context:    {op: generate.context, params: {max_context_length: 256}}
  answer:     {op: generate.answer, params: {model: local, max_tokens: 32}}
  references: {op: generate.references}
"""


@pytest.fixture
def tessera(monkeypatch, capsys):
    """``tessera(*args, home=..., check=0, stdin=None)``: the command in this process (tests/flows/test_cli.py)."""
    return functools.partial(tessera_in_process, monkeypatch, capsys)


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "small_rag.yaml"
    path.write_text(SPEC)
    return path


@pytest.mark.integration  # a whole chat over the bundled corpus in a process of its own: in make test only
def test_a_follow_up_is_searched_with_the_conversation_and_new_starts_over(fault_models, spec, tmp_path):
    fault_models.reply = "Honey bees make honey [1]."
    questions = "Which insects make honey?\nHow do they make it?\n/new\nHow do they make it?\n"
    proc = tessera_process("chat", str(spec), "--model", "fault-ok", "--no-cache", home=tmp_path / "home",
                           stdin=questions)
    lines = proc.stdout.splitlines()
    assert sum(line.startswith("answer: Honey bees make honey [1].") for line in lines) == 3, proc.stdout
    assert any(line.strip().startswith("[1]") for line in lines)  # the numbered source under the answer
    searched = [line.strip() for line in lines if "searched for:" in line]
    # only the follow-up in the first conversation: the one after /new has no turns before it
    assert searched == ["searched for: How do they make it? (Which insects make honey?; Honey bees make honey.)"]
    prompts = [body["messages"][-1]["content"] for body in fault_models.bodies]
    assert len(prompts) == 3 and "Bee" in prompts[1] and "Bee" not in prompts[2]  # what each follow-up found
    assert all(body["stream"] for body in fault_models.bodies)  # printed as written: the line above, whole


def test_a_flow_that_does_not_answer_is_refused_in_one_line(tmp_path, tessera):
    proc = tessera("chat", "bm25", "--index", str(tmp_path / "none"), home=tmp_path / "home", check=2, stdin="")
    assert_one_line_error(proc, "flow 'bm25' gives no answer")


def test_a_misspelt_model_or_a_missing_index_is_refused_before_the_first_question(tmp_path, tessera):
    proc = tessera("chat", "--model", "gemma", "--index", str(tmp_path), home=tmp_path / "home", check=2,
                   stdin="Which insects make honey?\n")
    assert_one_line_error(proc, "field '--model'", "unknown model 'gemma'", "did you mean 'gemma2'?")
    proc = tessera("chat", "--index", str(tmp_path / "none"), home=tmp_path / "home", check=2,
                   stdin="Which insects make honey?\n")
    assert_one_line_error(proc, f"no index at {tmp_path / 'none'}")
    assert proc.stdout == ""  # no greeting before the error


def test_a_model_whose_key_is_unset_is_refused_before_the_greeting(tmp_path, tessera, monkeypatch):
    """It greeted, waited for a question, then failed naming ``steps.answer.params.model``, not ``--model``."""
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    proc = tessera("chat", "--model", "DeepSeekv3", "--index", str(tmp_path), home=tmp_path / "home", check=2,
                   stdin="Which insects make honey?\n")
    assert_one_line_error(proc, "field '--model'", "model 'DeepSeekv3' reads $DEEPSEEK_API_KEY, which is not set")
    assert proc.stdout == "" and "ask a question" not in proc.stderr


def test_a_model_on_an_ollama_server_that_does_not_answer_is_refused_before_the_greeting(spec, tmp_path, tessera,
                                                                                        monkeypatch):
    """``tessera chat --model gemma2`` with no Ollama running greeted, then failed each question after its search
    and retries ("connection refused"), the chat going on."""
    from operators.llm.testing import closed_port

    monkeypatch.setenv("OLLAMA_API_BASE", f"http://127.0.0.1:{closed_port()}")
    given = tessera("chat", str(spec), "--model", "gemma2", home=tmp_path / "home", check=2, stdin="Bees?\n")
    assert_one_line_error(given, "field '--model'", "model 'gemma2' cannot be reached: no Ollama server answers on",
                          "start it (ollama serve), or set OLLAMA_API_BASE", "or give another --model")
    assert given.stdout == ""  # no greeting
    spec.write_text(SPEC.replace("model: local", "model: gemma2"))
    in_spec = tessera("chat", str(spec), home=tmp_path / "home", check=2, stdin="Bees?\n")
    assert_one_line_error(in_spec, "step 'answer'", "model 'gemma2' cannot be reached")


@pytest.mark.integration  # the ingested sample, and MiniLM
def test_after_make_demo_its_index_is_the_default(fault_models, sample_index, tmp_path, tessera):
    checkout = tmp_path / "checkout"  # a clone after make demo: its index where make demo puts it
    (checkout / ".tessera" / "indices").mkdir(parents=True)
    (checkout / ".tessera" / "indices" / "sample").symlink_to(sample_index)
    fault_models.reply = "Honey bees make honey [1]."
    proc = tessera("chat", "--model", "fault-ok", "--no-cache", home=tmp_path / "home",
                   stdin="Which insects make honey?\n", cwd=checkout)
    assert proc.stdout.splitlines()[0].startswith("rag over .tessera/indices/sample: ask a question"), proc.stdout
    # rag answers in the short style: from the reply's first word the question lacks to the end of its clause (a span
    # ending on "bees" would leave "make honey" dangling), and the document holding them
    assert "answer: bees make honey\n  [1] Bee (wv00790#0)" in proc.stdout, proc.stdout
    missing = tessera("chat", home=tmp_path / "home", stdin="", cwd=tmp_path, check=2)
    assert_one_line_error(missing, "operator retrieve.bm25 needs an index: pass --index")
    assert f"without it, chat reads .tessera/indices/sample in this folder ({tmp_path})" in missing.stderr
    # outside a clone: the index tessera ingest --index sample makes in $TESSERA_HOME, from any folder (it was not
    # looked for: a wheel's user was told to pass --index)
    (tmp_path / "home" / "indices").mkdir(parents=True)
    (tmp_path / "home" / "indices" / "sample").symlink_to(sample_index)
    proc = tessera("chat", "--model", "fault-ok", "--no-cache", home=tmp_path / "home",
                   stdin="Which insects make honey?\n", cwd=tmp_path)
    assert proc.stdout.splitlines()[0].startswith(f"rag over {tmp_path / 'home' / 'indices' / 'sample'}: ask"), \
        proc.stdout
    assert "[1] Bee (wv00790#0)" in proc.stdout, proc.stdout


def test_without_an_index_the_error_says_the_command_that_makes_one_not_make_demo(tmp_path, tessera):
    """A user of an installed wheel, in a folder of his own, has no Makefile: the error said "chat reads make
    demo's"; now it names the tessera ingest that makes the index it looks for."""
    missing = tessera("chat", home=tmp_path / "home", stdin="", cwd=tmp_path, check=2)
    assert_one_line_error(missing, "operator retrieve.bm25 needs an index: pass --index NAME_OR_PATH")
    assert (f"without it, chat reads .tessera/indices/sample in this folder ({tmp_path}), else $TESSERA_HOME's "
            "'sample', and neither is there (tessera ingest --source FILE --index sample makes the second, from any "
            "folder)") in missing.stderr
    assert "make demo" not in missing.stderr


def test_a_question_over_the_query_limit_is_said_and_the_chat_goes_on(fault_models, spec, tmp_path, tessera):
    """A question over 10,000 characters (tessera run's and the service's limit) is neither searched for nor sent to
    the model: one note, and the next question is asked. A pasted 5 MB question was tokenised whole."""
    proc = tessera("chat", str(spec), "--model", "fault-ok", "--no-cache", "--json", home=tmp_path / "home",
                   stdin="bees " * 4001 + "\n")
    assert fault_models.bodies == []
    assert json.loads(proc.stdout)["not_asked"].startswith("the question has 20004 characters")
    assert "the question has 20004 characters, over the limit of 10000 for a query" in proc.stderr
    assert "ask a shorter one" in proc.stderr and TRACEBACK not in proc.stderr


def test_an_unknown_command_is_said_and_not_asked(fault_models, spec, tmp_path, tessera):
    """A mistyped /quit was searched for and answered as a question."""
    proc = tessera("chat", str(spec), "--model", "fault-ok", "--no-cache", "--json", home=tmp_path / "home",
                   stdin="/quite\n/reset\n")
    assert [json.loads(line)["question"] for line in proc.stdout.splitlines()] == ["/quite", "/reset"]
    assert fault_models.bodies == []
    assert "unknown command /quite" in proc.stderr and "unknown command /reset" in proc.stderr
    assert "/help lists more" in proc.stderr


def test_an_answer_cut_by_max_tokens_says_so_as_tessera_run_does(fault_models, spec, tmp_path, tessera):
    """The chat printed an answer that max_tokens stopped mid-sentence as if whole ("... and it plays"), and its
    JSON line did not say so; ``tessera run`` says it under the answer."""
    fault_models.reply = "Honey bees make honey [1] and"  # fault-length: the reply stopped at max_tokens
    shown = tessera("chat", str(spec), "--model", "fault-length", "--no-cache", home=tmp_path / "home",
                    stdin="Which insects make honey?\n")
    lines = shown.stdout.splitlines()
    said = next(i for i, line in enumerate(lines) if line.startswith("answer: Honey bees make honey [1] and"))
    assert lines[said + 1].strip() == "(cut off at the step's max_tokens: the answer may end mid-sentence)", lines
    scripted = tessera("chat", str(spec), "--model", "fault-length", "--no-cache", "--json", home=tmp_path / "home",
                       stdin="Which insects make honey?\n")
    assert json.loads(scripted.stdout)["answer_cut"] is True
    fault_models.reply = "Honey bees make honey [1]."
    whole = tessera("chat", str(spec), "--model", "fault-ok", "--no-cache", "--json", home=tmp_path / "home",
                    stdin="Which insects make honey?\n")
    assert "answer_cut" not in json.loads(whole.stdout) and "cut off" not in whole.stderr


def test_a_line_that_is_not_utf8_or_only_control_characters_is_said_and_not_asked(fault_models, spec, tmp_path,
                                                                                    tessera):
    """Piped questions: a Latin-1 byte (read as a lone surrogate) ended the chat with an internal error, the later
    questions unasked; a NUL alone was searched for and went into the next follow-up's search."""
    proc = tessera("chat", str(spec), "--model", "fault-ok", "--no-cache", "--json", home=tmp_path / "home",
                   stdin="caf\udce9 honey?\n\x00\nWhich insects make honey?\n")
    assert "that line is not UTF-8 text (byte 0xe9): not asked" in proc.stderr, proc.stderr
    assert "that line holds only control characters: not asked" in proc.stderr
    line = json.loads(proc.stdout.splitlines()[-1])
    assert line["turn"] == 1 and line["question"] == "Which insects make honey?" and len(fault_models.bodies) == 1
    assert "\x00" not in json.dumps(fault_models.bodies)


def test_json_gives_a_line_for_every_question_also_one_not_asked(fault_models, spec, tmp_path, tessera):
    """--json wrote a line per answer only: a question over the limit, a line that is not UTF-8 or a mistyped
    command left no line, so a script that writes a question and reads its line waited for ever, and one that
    pairs its questions with the lines paired the rest wrongly. Now each such line has its line, with no turn and no
    answer, and why; /new and /help, the chat's own commands, still have none."""
    fault_models.reply = "Honey bees make honey [1]."
    proc = tessera("chat", str(spec), "--model", "fault-ok", "--no-cache", "--json", home=tmp_path / "home",
                   stdin="/quite\n" + "bees " * 2001 + "\ncaf\udce9?\n/new\n/help\nWhich insects make honey?\n")
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(line["turn"], line["question"][:6], line["answer"]) for line in lines] == [
        (None, "/quite", None), (None, "bees b", None), (None, "caf\ufffd?", None),
        (1, "Which ", "Honey bees make honey [1].")], proc.stdout
    assert lines[0]["not_asked"] == "unknown command /quite: /new starts over, /exit ends, /help lists more"
    assert lines[1]["not_asked"].startswith("the question has 10004 characters, over the limit of 10000")
    assert lines[2]["not_asked"].startswith("that line is not UTF-8 text (byte 0xe9): not asked")
    assert "not_asked" not in lines[3] and len(fault_models.bodies) == 1


class _Terminal(io.StringIO):
    """Typed (or pasted) lines on a terminal: ``sys.stdin.isatty()`` is what makes the chat read them as a person's.
    With ``ctrl_c``, a Ctrl-C is pressed after them, where Ctrl-D would end the input."""

    def __init__(self, text: str, ctrl_c: bool = False) -> None:
        super().__init__(text)
        self.ctrl_c = ctrl_c

    def isatty(self) -> bool:
        return True

    def readline(self, *args) -> str:
        line = super().readline(*args)
        if not line and self.ctrl_c:
            raise KeyboardInterrupt
        return line


def test_on_a_terminal_an_empty_line_is_skipped_and_help_lists_the_commands(fault_models, spec, tmp_path, tessera,
                                                                            monkeypatch):
    """On a terminal an empty line ended the chat: a pasted text with a blank line in it was asked up to there and its
    further lines went to the shell as commands; /help was an unknown command."""
    monkeypatch.setattr(sys, "stdin", _Terminal("/help\nWhich insects make honey?\n\n   \nHow do they make it?\n"))
    proc = tessera("chat", str(spec), "--model", "fault-ok", "--no-cache", "--json", home=tmp_path / "home")
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [a["question"] for a in answers] == ["Which insects make honey?", "How do they make it?"], proc.stdout
    assert "/new starts a new conversation" in proc.stderr and "unknown command" not in proc.stderr, proc.stderr


def test_on_a_terminal_the_prompt_of_a_json_chat_goes_to_stderr(fault_models, spec, tmp_path, tessera, monkeypatch):
    """``tessera chat --json > answers.jsonl`` typed on a terminal: the prompt went to stdout, into the file (each
    line began "you> ", no JSON), and the person typing saw none."""
    monkeypatch.setattr(sys, "stdin", _Terminal("Which insects make honey?\n"))
    scripted = tessera("chat", str(spec), "--model", "fault-ok", "--no-cache", "--json", home=tmp_path / "home")
    assert json.loads(scripted.stdout)["turn"] == 1 and scripted.stderr.count("you> ") == 2, scripted
    monkeypatch.setattr(sys, "stdin", _Terminal("Which insects make honey?\n"))
    shown = tessera("chat", str(spec), "--model", "fault-ok", "--no-cache", home=tmp_path / "home")
    assert shown.stdout.count("you> ") == 2 and "you> " not in shown.stderr, shown  # as the answers: stdout


def test_ctrl_c_at_the_prompt_ends_the_chat_on_a_line_of_its_own(fault_models, spec, tmp_path, tessera, monkeypatch):
    """The note was written after what had been typed at the prompt ("how do thetessera: interrupted")."""
    monkeypatch.setattr(sys, "stdin", _Terminal("", ctrl_c=True))
    proc = tessera("chat", str(spec), "--model", "fault-ok", "--no-cache", home=tmp_path / "home", check=130)
    assert proc.stdout.endswith("more)\nyou> \n") and proc.stderr == "tessera: interrupted\n", proc
    assert fault_models.bodies == []


def test_a_failed_step_is_said_once_under_its_answer(fault_models, tmp_path, tessera, monkeypatch, caplog):
    """The reason an answer failed was said twice: a warning line ("query 1 keeps its input: ..."), then "no answer
    could be written (...)". A follow-up whose rewriting failed but was answered still says why, once."""
    monkeypatch.setenv("TESSERA_MODELS", str(fault_models.models_file(tmp_path / "models.yaml", num_retries=0)))
    spec = tmp_path / "rag.yaml"
    spec.write_text(SPEC.replace("{op: query.contextualize}", "{op: query.contextualize, params: {method: llm, "
                                 "model: fault-error}}").replace("model: local", "model: fault-ok"))
    fault_models.reply = "Honey bees make honey [1]."
    with caplog.at_level("WARNING"):
        failed = tessera("chat", str(spec), "--model", "fault-error", "--no-cache", home=tmp_path / "home",
                         stdin="Which insects make honey?\n")
        answered = tessera("chat", str(spec), "--no-cache", home=tmp_path / "home",
                           stdin="Which insects make honey?\nHow do they make it?\n", cwd=tmp_path)
    assert "keep" not in caplog.text and failed.stderr == answered.stderr == "", caplog.text
    assert failed.stdout.count("the fault server failed on purpose") == 1, failed.stdout
    assert "answer: no answer could be written (api: model 'fault-error'" in failed.stdout
    said = [line.strip() for line in answered.stdout.splitlines() if "failed on purpose" in line]
    assert len(said) == 1 and said[0].startswith("step standalone failed: api: model 'fault-error'"), answered.stdout


def test_on_a_narrow_terminal_what_was_searched_for_wraps_with_its_indent(fault_models, spec, tmp_path, tessera):
    """The "searched for:" line's wrapped lines began at the margin, as if lines of their own."""
    fault_models.reply = "Honey bees make honey [1]."
    proc = tessera("chat", str(spec), "--model", "fault-ok", "--no-cache", home=tmp_path / "home", columns=40,
                   stdin="Which insects make honey?\nHow do they make it?\n")
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  searched for: How do they make it?"))
    searched = lines[start:]
    assert len(searched) > 1 and all(line.startswith("  ") and len(line) <= 40 for line in searched), lines
    assert " ".join(line.strip() for line in searched) == ("searched for: How do they make it? (Which insects make "
                                                           "honey?; Honey bees make honey.)")
