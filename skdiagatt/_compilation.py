"""JAX's persistent compilation cache behind one setting, inherited by the processes started afterwards."""

import os

import jax
from jax.experimental.compilation_cache import compilation_cache as _jax_cache

__all__ = ["CACHE_VARIABLE", "compilation_cache", "set_compilation_cache", "cache_from_environment"]

#: The environment variable that turns the cache on when skdiagatt is imported.
CACHE_VARIABLE = "SKDIAGATT_COMPILATION_CACHE"


def set_compilation_cache(path):
    """Keep compiled programs on disk in ``path`` and load them in later processes.

    A fresh Python process compiles every XLA program a fit or a prediction
    runs, and on small data that is most of the first ``fit`` and
    ``predict``.  This turns on JAX's persistent compilation cache in
    ``path``: every program compiled from then on is written there, however
    fast it compiled (JAX keeps only those that took a second or more by
    default, and most of skdiagatt's take less), and a process that needs a
    program already there loads it instead of compiling it.  A loaded
    program is the compiled one, so fits and predictions are bit for bit
    those of a process that compiled afresh.  What the cache does not save
    is JAX tracing the Python functions into programs again in each process.

    The setting is also written to the environment variable
    ``SKDIAGATT_COMPILATION_CACHE``, which skdiagatt reads when it is
    imported: processes started afterwards (the worker processes of
    ``GridSearchCV(n_jobs=...)`` and ``cross_val_score(n_jobs=...)``,
    subprocesses) use the same cache, and setting that variable in the
    shell turns the cache on without any code.

    Parameters
    ----------
    path : str, path-like or None
        The cache's folder, created if missing.  None turns the cache off
        (in this process and in those started afterwards).

    Notes
    -----
    joblib keeps its worker processes between searches: workers started
    before the call keep the setting they started with, so call it before
    the first parallel search (or set the variable before Python starts).
    Programs compiled in this process before the call are not written to
    the cache.  The folder grows with every new shape and setting; delete
    it to start afresh.  Like any store of programs to run, it must be
    writable by you alone: whoever can write to it can run code in your
    processes.

    Examples
    --------
    >>> import os, tempfile
    >>> import skdiagatt
    >>> folder = os.path.join(tempfile.mkdtemp(), "jax-cache")
    >>> skdiagatt.set_compilation_cache(folder)
    >>> skdiagatt.compilation_cache() == folder, os.environ["SKDIAGATT_COMPILATION_CACHE"] == folder
    (True, True)
    >>> skdiagatt.set_compilation_cache(None)
    >>> skdiagatt.compilation_cache() is None, "SKDIAGATT_COMPILATION_CACHE" in os.environ
    (True, False)
    """
    if path is None:
        os.environ.pop(CACHE_VARIABLE, None)
        jax.config.update("jax_compilation_cache_dir", None)
        _jax_cache.reset_cache()
        return
    path = os.path.abspath(os.fspath(path))
    os.makedirs(path, exist_ok=True)
    os.environ[CACHE_VARIABLE] = path
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    # -1: every entry, whatever its size, and no filesystem-specific override.
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    # JAX opens its cache once, at the first compilation; without the reset a
    # process that compiled before the call would keep its earlier folder.
    _jax_cache.reset_cache()


def compilation_cache():
    """The folder of JAX's persistent compilation cache, or None when it is off.

    Returns
    -------
    str or None
        JAX's ``jax_compilation_cache_dir``: the folder given to
        :func:`set_compilation_cache`, or one set through JAX itself.

    Examples
    --------
    >>> import os
    >>> import skdiagatt
    >>> folder = skdiagatt.compilation_cache()    # None while the cache is off
    >>> folder is None or os.path.isdir(folder)
    True
    """
    return jax.config.jax_compilation_cache_dir


def cache_from_environment():
    """Apply ``SKDIAGATT_COMPILATION_CACHE`` if it names a folder (on import of skdiagatt)."""
    path = os.environ.get(CACHE_VARIABLE)
    if path:
        set_compilation_cache(path)
