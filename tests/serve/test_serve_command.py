"""`infill serve`'s arguments and its exits that need no Ray cluster (team_server.cli): bad
arguments (2), a bad tokens file (2), Ray Serve missing (4, with how to install it)."""

from __future__ import annotations

import sys

import pytest

from infill.cli import main
from team_server.cli import EXIT_INPUT, EXIT_NO_RAY, build_parser, config_of, is_loopback

TOKENS = "alice alice-0123456789abcdef\n"


def test_the_arguments_become_the_replicas_config(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKENS)
    args = build_parser().parse_args(["--model", "org/name", "--autoscale", "1-4", "--tokens", str(tokens),
                                      "--rate", "2", "--request-timeout", "9",
                                      "--kept-contexts", "8"])  # fmt: skip
    config, replicas, autoscale = config_of(args)
    assert (config.model, replicas, autoscale, config.kept_contexts) == ("org/name", 1, (1, 4), 8)
    assert (config.rate, config.request_timeout) == (2, 9)
    assert [name for _, name in config.tokens] == ["alice"] and "alice-0123" not in repr(config)
    defaults, _, none = config_of(build_parser().parse_args([]))
    assert defaults.tokens is None and none is None and defaults.kept_contexts == 0
    assert build_parser().parse_args([]).host == "127.0.0.1"


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--autoscale", "4-1"], "--autoscale"),
        (["--replicas", "0"], "--replicas"),
        (["--tls-cert", "cert.pem"], "--tls-key"),
        (["--tokens", "/no/such/tokens"], "cannot read"),
        (["--rate", "0"], "--rate"),
        (["--kept-contexts", "-1"], "--kept-contexts"),
    ],
)
def test_bad_arguments_exit_2_before_ray_is_touched(argv, says, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # importing it would fail: it must not be reached
    assert main(["serve", *argv]) == EXIT_INPUT
    assert says in capsys.readouterr().err


def test_without_ray_it_says_how_to_install_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["serve"]) == EXIT_NO_RAY
    err = capsys.readouterr().err
    assert "Ray Serve is not installed" in err and 'pip install -e ".[serve]"' in err


def test_a_tokens_file_with_a_bad_line_exits_2(tmp_path, capsys):
    tokens = tmp_path / "tokens"
    tokens.write_text("alice\n")
    assert main(["serve", "--tokens", str(tokens)]) == EXIT_INPUT
    assert "line 1" in capsys.readouterr().err


def test_loopback_hosts():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
