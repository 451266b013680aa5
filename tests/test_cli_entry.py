"""The installed entry points start and list every command group."""

from __future__ import annotations

import subprocess
import sys


def test_python_m_vqadiag_help_lists_command_groups():
    out = subprocess.run(
        [sys.executable, "-m", "vqadiag", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in ("score", "stats", "version"):
        assert command in out


def test_version(run_cli):
    from vqadiag import __version__

    result = run_cli("version")
    assert result.exit_code == 0
    assert result.stdout.strip() == __version__
    assert run_cli("version", "--json").json() == {"version": __version__}


def _command_callbacks(group) -> list:
    """Every command callback under a Typer app, sub-apps included."""
    callbacks = [info.callback for info in group.registered_commands]
    for sub in group.registered_groups:
        callbacks += _command_callbacks(sub.typer_instance)
    return callbacks


def test_command_annotations_are_objects_not_strings():
    """Typer resolves every parameter's annotation each time the command line starts;
    string annotations (``from __future__ import annotations`` in a command module)
    make that an ``eval`` per parameter of all commands (docs/contributing.md)."""
    import inspect

    from vqadiag.cli.main import app

    callbacks = _command_callbacks(app)
    assert len(callbacks) > 20
    for callback in callbacks:
        function = inspect.unwrap(callback)
        strings = {k: v for k, v in function.__annotations__.items() if isinstance(v, str)}
        assert not strings, f"{function.__module__}.{function.__qualname__}: {strings}"


def _click_commands(command, path=()):
    """(path, click command) of every leaf command under ``command`` (Typer's own click:
    groups are told by ``list_commands``)."""
    if hasattr(command, "list_commands"):
        ctx = command.context_class(command)
        for name in command.list_commands(ctx):
            yield from _click_commands(command.get_command(ctx, name), (*path, name))
    else:
        yield path, command


def test_every_seed_option_refuses_a_negative_seed_before_running():
    """numpy's generators take no negative seed; a command that let one through failed
    with a traceback after its work (a half-written run folder)."""
    import typer

    from vqadiag.cli.main import app

    seeded = []
    for path, command in _click_commands(typer.main.get_command(app)):
        for param in command.params:
            if "--seed" in getattr(param, "opts", ()):
                seeded.append(path)
                assert param.min == 0, path
    assert len(seeded) >= 20  # 21 commands: train, synth, diagnose, every score command …


def test_a_negative_seed_is_one_line(run_cli, tmp_path):
    got = run_cli("synth", "--out", tmp_path / "w", "--images", "5", "--seed", "-1")
    assert got.exit_code != 0
    assert got.stderr.strip().splitlines() == [
        "error: --seed: Input should be greater than or equal to 0"
    ]
    assert not (tmp_path / "w").exists()


def test_help_texts_keep_their_brackets():
    """``--help`` renders help texts as rich markup, where ``[box indices]`` is a style
    tag and vanishes (found in review: ``{imageId: {qid: }}``); such brackets are escaped
    (``\\[``) so that every help text prints as written."""
    import typer.main
    from rich.text import Text

    from vqadiag.cli.main import app

    def commands(group):
        for sub in group.commands.values():
            yield from commands(sub) if hasattr(sub, "commands") else [sub]

    for command in commands(typer.main.get_command(app)):
        for text in [command.help or ""] + [getattr(p, "help", "") or "" for p in command.params]:
            assert Text.from_markup(text).plain == text.replace("\\[", "["), text


def test_ctrl_c_is_one_line_and_exit_130(run_cli, monkeypatch):
    """Found in review: Typer turned Ctrl-C into exit 130 without a word."""
    import vqadiag.cli.main as cli_main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "emit", interrupted)
    result = run_cli("version")
    assert result.exit_code == 130
    assert result.stderr.strip() == (
        "error: interrupted: nothing half-written is left as finished; run the command "
        "again (a diagnosis resumes from the answers it stored)"
    )
