"""The command line's edges: fast help, one line for bad input, tracebacks for bugs, extras."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import mechrag
from mechrag.cli import COMMANDS, main
from mechrag.errors import InputError

CHECKOUT = str(Path(mechrag.__file__).parents[1])


def run_python(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter on this checkout (so ``sys.modules`` starts empty)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": CHECKOUT, "PATH": ""},
    )


HELP_THEN_MODULES = """
import sys
from mechrag.cli import main
try:
    main({argv!r})
except SystemExit as done:
    assert done.code == 0, done.code
heavy = ("torch", "transformer_lens", "transformers", "captum")
heavy = sorted(name for name in heavy if name in sys.modules)
print("HEAVY", heavy)
"""


def test_help_lists_every_subcommand_without_importing_torch():
    done = run_python(HELP_THEN_MODULES.format(argv=["--help"]))
    assert done.returncode == 0, done.stderr
    for command in COMMANDS:
        assert command in done.stdout
    assert "HEAVY []" in done.stdout


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "explain"])
def test_subcommand_help_does_not_import_torch(command):
    done = run_python(HELP_THEN_MODULES.format(argv=[command, "--help"]))
    assert done.returncode == 0, done.stderr
    assert "--out" in done.stdout or "summary" in done.stdout
    assert "HEAVY []" in done.stdout


def test_python_dash_m_mechrag_is_the_same_entry():
    done = subprocess.run(
        [sys.executable, "-m", "mechrag", "--version"],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": CHECKOUT, "PATH": ""},
    )
    assert done.returncode == 0 and done.stdout.strip() == f"mechrag {mechrag.__version__}"


def test_attribute_choices_are_the_method_registry(capsys):
    with pytest.raises(SystemExit):
        main(["attribute", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in mechrag.METHODS:
        assert name in text


def test_bad_input_is_one_line_with_exit_2_and_writes_nothing(tmp_path, capsys, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("no model may load on bad input")

    monkeypatch.setattr("mechrag.models.loading.load_model", never)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    out = tmp_path / "out"
    arguments = ["--query", "Who?", "--context-file", str(empty), "--out", str(out)]
    assert main(["attribute", *arguments]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("mechrag attribute: error: context file")
    assert main(["localize", "--query", "Who?", "--context-file", str(tmp_path / "none")]) == 2
    assert "cannot read context file" in capsys.readouterr().err
    assert not out.exists()


def test_a_programming_error_keeps_its_traceback(tmp_path, monkeypatch):
    """A bug (here a TypeError inside the command) is not reported as bad input."""

    def buggy(args):
        raise TypeError("a bug")

    monkeypatch.setattr("mechrag.cli.demo.run", buggy)
    with pytest.raises(TypeError, match="a bug"):
        main(["demo", "--out", str(tmp_path)])

    def refuses(args):
        raise InputError("bad value")

    monkeypatch.setattr("mechrag.cli.demo.run", refuses)
    assert main(["demo", "--out", str(tmp_path)]) == 2


@pytest.mark.parametrize("hidden", ["captum", "faiss"])
def test_explain_without_the_retrieval_extra_names_it(hidden, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, hidden, None)  # what an uninstalled module looks like
    assert main(["explain", "--query", "Who?", "--dataset", "hotpotqa"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert f"module {hidden!r} is missing" in error
    assert "pip install 'mechrag[retrieval]'" in error
    with pytest.raises(ImportError, match=r"mechrag\[retrieval\]"):
        mechrag.__getattr__("explain")


def test_sweep_config_is_read_without_tomllib(tmp_path, monkeypatch):
    """Python 3.10 has no tomllib: the same file is read through tomli."""
    pytest.importorskip("tomli")  # the dev extra installs it on every Python
    from mechrag.sweep.config import read_toml

    config = tmp_path / "sweep.toml"
    config.write_text('method = "arc_jsd"\nout = "runs/x"\n[options]\nmax_new_tokens = 8\n')
    expected = read_toml(config)
    monkeypatch.setitem(sys.modules, "tomllib", None)
    assert read_toml(config) == expected == {
        "method": "arc_jsd",
        "out": "runs/x",
        "options": {"max_new_tokens": 8},
    }


def test_sweep_config_errors_are_bad_input(tmp_path, capsys):
    broken = tmp_path / "broken.toml"
    broken.write_text("method = \n")
    assert main(["sweep", "--config", str(broken)]) == 2
    assert "is not valid TOML" in capsys.readouterr().err
    assert main(["sweep", "--config", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read config file" in capsys.readouterr().err
    assert main(["sweep", "--method", "no_such", "--out", str(tmp_path / "o")]) == 2
    assert "unknown sweep method 'no_such'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_missing_inputs_are_one_line(tmp_path, capsys):
    """Folders, data files and models that are not there: one line, exit 2, nothing written."""
    assert main(["sweep", "summary", str(tmp_path / "nowhere")]) == 2
    assert "no sweep in" in capsys.readouterr().err
    out = tmp_path / "out"
    base = ["sweep", "--method", "arc_jsd", "--dataset", "squad", "--n", "1", "--no-progress"]
    assert main([*base, "--path", str(tmp_path / "none.json"), "--out", str(out)]) == 2
    assert "squad file not found" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main([*base, "--path", str(broken), "--out", str(out)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err
    assert main([*base, "--model", "toy:nope", "--out", str(out)]) == 2
    assert "unknown tiny model family" in capsys.readouterr().err
    assert not out.exists()  # a sweep whose model does not load leaves no folder


@pytest.mark.parametrize("command", COMMANDS)
def test_subcommand_help_is_plain_text_with_an_example_that_parses(command, capsys):
    """No reStructuredText markup reaches the terminal, and every help ends with an example
    that the command's own parser accepts."""
    import shlex

    from mechrag.cli import build_parser

    with pytest.raises(SystemExit):
        main([command, "--help"])
    shown = capsys.readouterr().out
    assert "``" not in shown and not re.search(r":\w+:`", shown)
    example = shown.rsplit("example:", 1)[1].strip()
    words = shlex.split(example)
    assert words[:2] == ["mechrag", command]
    build_parser(command).parse_args(words[1:])


def test_plain_text_unwraps_roles_and_literals():
    from mechrag.cli import plain_text

    assert plain_text("``--out`` takes :data:`a.METHODS` and :class:`~mechrag.case.Case`") == (
        "--out takes a.METHODS and Case"
    )
