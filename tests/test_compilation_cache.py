"""``set_compilation_cache`` / ``SKDIAGATT_COMPILATION_CACHE``: compiled programs kept on disk across processes.

Each scenario runs in fresh Python processes, as a user's scripts do: one
with the setting compiles and writes the cache, the next one loads the
programs instead of compiling them and fits the same model bit for bit.
"""

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import skdiagatt
from skdiagatt._compilation import CACHE_VARIABLE

pytestmark = pytest.mark.scale_out  # fresh processes (run by `python -m pytest -m scale_out`)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A small fit and prediction; prints the cache hits and misses JAX counted,
# and saves the fitted arrays and predictions.
FIT_SCRIPT = textwrap.dedent("""
    import json
    import sys
    from collections import Counter

    import numpy as np
    from jax import monitoring

    events = Counter()
    monitoring.register_event_listener(lambda event, **kw: events.update([event.rsplit("/", 1)[-1]]))

    import skdiagatt
    from skdiagatt.datasets import make_individualized_regression

    if len(sys.argv) > 2:
        skdiagatt.set_compilation_cache(sys.argv[2])
    X, y = make_individualized_regression(40, n_rows=(4, 9), n_features=3, random_state=0)[:2]
    est = skdiagatt.DiagAttRegressor(max_iter=2, calibration_iter=0, random_state=0).fit(X, y)
    arrays = {k: np.asarray(v) for k, v in vars(est).items() if k.endswith("_") and isinstance(v, np.ndarray)}
    np.savez(sys.argv[1], predictions=est.predict(X), **arrays)
    import jax
    print(json.dumps({"hits": events["cache_hits"], "misses": events["cache_misses"],
                      "setting": [skdiagatt.compilation_cache(), jax.config.jax_persistent_cache_min_compile_time_secs]}))
""")


def run_python(code, *args, env=None):
    """Run ``code`` in a fresh interpreter that imports skdiagatt from this checkout; its last line of output."""
    environ = {k: v for k, v in os.environ.items() if k != CACHE_VARIABLE and not k.startswith("JAX_")}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    environ.update(env or {})
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=environ, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def fit_in_process(out, env=None, cache=None):
    counts = run_python(FIT_SCRIPT, out, *([cache] if cache else []), env=env)
    with np.load(out) as f:
        return json.loads(counts), dict(f)


def assert_bit_identical(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
        assert np.array_equal(a[key], b[key], equal_nan=True), key


@pytest.fixture
def restore_cache():
    before = skdiagatt.compilation_cache(), os.environ.get(CACHE_VARIABLE)
    yield
    skdiagatt.set_compilation_cache(before[0])
    if before[1] is None:
        os.environ.pop(CACHE_VARIABLE, None)


def test_the_setting_turns_the_cache_on_and_off(tmp_path, restore_cache):
    folder = tmp_path / "new" / "cache"
    skdiagatt.set_compilation_cache(folder)
    assert folder.is_dir()
    assert skdiagatt.compilation_cache() == str(folder)
    assert os.environ[CACHE_VARIABLE] == str(folder)
    # Every program is kept, however fast it compiled.
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
    skdiagatt.set_compilation_cache(None)
    assert skdiagatt.compilation_cache() is None
    assert CACHE_VARIABLE not in os.environ


def test_a_second_process_loads_the_programs_and_fits_the_same_bits(tmp_path):
    # The first process turns the cache on with the function, the second with
    # the variable: the function fills the cache the variable reads.
    cache = tmp_path / "cache"
    env = {CACHE_VARIABLE: str(cache)}
    first, fitted = fit_in_process(tmp_path / "first.npz", cache=cache)
    assert first["hits"] == 0 and first["misses"] > 0 and first.pop("setting") == [str(cache), 0.0]
    written = os.listdir(cache)
    assert len(written) >= first["misses"]
    second, refitted = fit_in_process(tmp_path / "second.npz", env)
    assert second.pop("setting") == [str(cache), 0.0]  # the variable turns the cache on at import
    assert second["misses"] == 0 and second["hits"] == first["misses"]
    assert sorted(os.listdir(cache)) == sorted(written)  # nothing new to write
    assert_bit_identical(fitted, refitted)
    # And a process without the cache, compiling afresh, fits the same bits.
    uncached, plain = fit_in_process(tmp_path / "plain.npz")
    assert uncached == {"hits": 0, "misses": 0, "setting": [None, 1.0]}  # JAX's defaults without it
    assert_bit_identical(fitted, plain)


def test_the_function_reaches_processes_started_afterwards(tmp_path):
    # As a script calling the function, then a parallel search: its joblib
    # (loky) workers start after the call and inherit the setting.
    code = textwrap.dedent("""
        import json, sys
        from joblib import Parallel, delayed
        import skdiagatt

        skdiagatt.set_compilation_cache(sys.argv[1])
        seen = Parallel(n_jobs=2, backend="loky")(delayed(skdiagatt.compilation_cache)() for _ in range(2))
        print(json.dumps(seen))
    """)
    assert json.loads(run_python(code, tmp_path)) == [str(tmp_path)] * 2

