"""Compiled-program bookkeeping: a compile counter, and releasing programs near the mapping limit."""

import jax

from .layout import current_layout

__all__ = ["compile_count", "release_programs_near_map_limit"]

_COMPILES = [0]  # XLA compilations counted since the listener was registered
_CHECKED_AT = [0]  # the count when the memory mappings were last read
_LISTENING = [False]

_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


def _count_compilation(event, duration, **kwargs):
    if event == _COMPILE_EVENT:
        _COMPILES[0] += 1


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
