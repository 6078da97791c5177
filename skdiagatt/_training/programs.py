"""Compiled-program bookkeeping: a compile counter, and releasing programs near the mapping limit."""

import contextlib

import jax

from .layout import current_layout

__all__ = ["compile_count", "compile_seconds", "on_compiling", "release_programs_near_map_limit"]

_COMPILES = [0]  # XLA compilations counted since the listener was registered
_SECONDS = [0.0]  # seconds spent lowering and compiling since then
_CHECKED_AT = [0]  # the count when the memory mappings were last read
_LISTENING = [False]
_WATCHERS = []  # called when a program is lowered, before XLA compiles it

_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_LOWERED_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
# Tracing is left out: a jitted function traced inside another reports its
# time inside the outer one's, which would count it twice.
_STAGES = (_COMPILE_EVENT, _LOWERED_EVENT)


def _count_compilation(event, duration, **kwargs):
    if event == _COMPILE_EVENT:
        _COMPILES[0] += 1
    if event in _STAGES:
        _SECONDS[0] += duration
    if event == _LOWERED_EVENT:
        # The lowering ends where the backend compilation, the long stage, starts.
        for watcher in list(_WATCHERS):
            watcher()


def _listen():
    # Registered on first use, not at import: importing the package should
    # not change JAX's global state.
    if not _LISTENING[0]:
        jax.monitoring.register_event_duration_secs_listener(_count_compilation)
        _LISTENING[0] = True


def compile_count():
    """XLA compilations in this process since the count started (on the first call here or fit)."""
    _listen()
    return _COMPILES[0]


def compile_seconds():
    """Seconds spent lowering and compiling programs since the count started."""
    _listen()
    return _SECONDS[0]


@contextlib.contextmanager
def on_compiling(watcher):
    """Inside the block, ``watcher()`` is called whenever XLA is about to compile a program."""
    _listen()
    _WATCHERS.append(watcher)
    try:
        yield
    finally:
        _WATCHERS.remove(watcher)


def release_programs_near_map_limit(layout=None):
    """Clear JAX's compiled programs when the process nears its limit of memory mappings.

    Every compiled XLA:CPU program holds about a hundred memory mappings and
    Linux allows a process 65,530 (``vm.max_map_count``); past the limit
    LLVM fails inside a compilation ("Cannot allocate memory"), which a grid
    search over ragged data can reach.  Called before each fit and
    prediction: past ``layout.map_fraction`` of the limit,
    ``jax.clear_caches()`` drops every compiled program (shapes seen again
    compile again, which costs seconds, not a crash).  The mappings are read
    only every ``layout.check_every`` compilations.  Does nothing where
    ``/proc`` is absent.

    Returns
    -------
    bool
        True if the caches were cleared.
    """
    layout = current_layout() if layout is None else layout
    count = compile_count()
    if count - _CHECKED_AT[0] < layout.check_every:
        return False
    _CHECKED_AT[0] = count
    try:
        with open("/proc/self/maps") as f:
            used = sum(1 for _ in f)
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
    except (OSError, ValueError):
        return False
    if used < layout.map_fraction * limit:
        return False
    jax.clear_caches()
    return True
