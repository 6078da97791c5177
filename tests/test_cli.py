"""``python -m skdiagatt``: validated arguments, help text, a small run."""

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from sklearn.exceptions import ConvergenceWarning

from skdiagatt.__main__ import main, parser

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--n-train", "-5"], "argument --n-train: must be at least 10, got -5"),
        (["--n-test", "0"], "argument --n-test: must be at least 1, got 0"),
        (["--seed", "x"], "argument --seed: expected an integer, got 'x'"),
        (["--seed", str(2**32)], "argument --seed: must be below 2**32"),
    ],
)
def test_bad_arguments_are_argparse_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_a_real_process_rejects_a_negative_count():
    done = subprocess.run([sys.executable, "-m", "skdiagatt", "--n-train", "-5"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "must be at least 10" in done.stderr and done.stdout == ""


def test_help_is_plain_text_with_every_option_explained():
    text = parser().format_help()
    assert "``" not in text and ":class:" not in text and "DiagAttRegressor" in text
    options = [a for a in parser()._actions if a.option_strings != ["-h", "--help"]]
    assert {a.dest for a in options} == {"n_train", "n_test", "seed"}
    assert all(a.help and "default" in a.help for a in options)


def test_a_small_run_prints_every_section(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert main(["--n-train", "10", "--n-test", "2", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "n_train=10, n_test=2" in out and "DiagAttClassifier: accuracy" in out
    assert "X_test[1]" in out and "X_test[2]" not in out
