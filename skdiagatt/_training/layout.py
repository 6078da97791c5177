"""The tuning knobs of training and inference, one frozen object, and the shape rounding they use."""

import contextlib
import math
from dataclasses import dataclass

__all__ = ["Layout", "current_layout", "use_layout", "round_count"]


@dataclass(frozen=True)
class Layout:
    """How training and inference cut their work: sizes that change speed, never results.

    Every size here keeps the results of a fit the same (bit for bit, or up
    to float summation order where a minibatch is differentiated in
    slices); tests and benchmarks construct other layouts with
    :func:`use_layout` to reach the paths that the defaults take only on
    large data.

    Attributes
    ----------
    run_steps : int
        Consecutive minibatches of one bucket that one compiled call runs:
        the per-call cost is paid once per run, and the stacked index arrays
        of a run stay small.
    slice_rows : int
        Rows per slice of a bucketed minibatch: a longer minibatch is
        differentiated in interleaved slices so that each slice's working set
        stays in cache.
    packed_slice_rows : int
        The same for packed minibatches, whose steps keep more intermediates
        per row.
    block_rows : int
        Rows per block of packed data: a sample pads at most
        ``block_rows - 1`` rows, and a block is the unit of the minibatch
        gather and of the first stage of the per-sample reductions.
    predict_rows : int
        Rows per prediction group: small enough that its arrays stay under
        glibc's threshold for mapping memory afresh (32 MiB), so that the
        allocator reuses them instead of faulting their pages in every call.
    predict_min_rows : int
        Prediction groups hold at least this many rows (filler included), so
        that the small buckets of ragged data share a few group sizes instead
        of compiling one per power of two of their sample count.
    check_every : int
        Compilations between two reads of the process's memory mappings
        (:func:`~skdiagatt._training.programs.release_programs_near_map_limit`):
        reading them costs milliseconds.
    map_fraction : float
        Share of the process's memory-mapping limit past which compiled
        programs are released.
    """

    run_steps: int = 8
    slice_rows: int = 1 << 15
    packed_slice_rows: int = 1 << 14
    block_rows: int = 4
    predict_rows: int = 1 << 14
    predict_min_rows: int = 1 << 12
    check_every: int = 50
    map_fraction: float = 0.5


_LAYOUT = [Layout()]


def current_layout():
    """The layout in force: that of the innermost :func:`use_layout`, else the defaults."""
    return _LAYOUT[0]


@contextlib.contextmanager
def use_layout(layout):
    """Train and predict with ``layout`` (a :class:`Layout`) inside the block.

    >>> with use_layout(Layout(run_steps=1)):   # doctest: +SKIP
    ...     est.fit(X, y)                         # one compiled call per step
    """
    if not isinstance(layout, Layout):
        raise TypeError(f"use_layout takes a Layout, got {type(layout).__name__}")
    previous, _LAYOUT[0] = _LAYOUT[0], layout
    try:
        yield layout
    finally:
        _LAYOUT[0] = previous


def round_count(m, bits=4):
    """Round a count up to ``bits`` significant bits (4: at most 12.5% more).

    >>> [round_count(m) for m in (1, 5, 17, 100, 9000)]
    [1, 5, 18, 104, 9216]
    >>> round_count(5142), round_count(5142, bits=5)
    (5632, 5376)
    """
    if m <= 1 << bits:
        return m
    unit = 1 << (m.bit_length() - bits)
    return unit * math.ceil(m / unit)


def pow2_at_least(m):
    """The smallest power of two >= ``m`` (1 for m <= 1)."""
    return 1 << max(0, (m - 1).bit_length())


def pow2_at_most(m, cap):
    """:func:`pow2_at_least` of ``m``, at most ``cap``."""
    return min(pow2_at_least(m), cap)
