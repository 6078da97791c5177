"""Pictures of what a model localized and how it trained (needs matplotlib).

Every function draws on ``ax`` (a new figure's axes when None) and returns it.
matplotlib is imported only when a function is called: the ``plot`` extra,
``pip install -e ".[plot]"`` in a source checkout (or ``pip install matplotlib``).

- :func:`plot_tokens`: a text's tokens shaded by attention weight or row
  contribution, the selected tokens boxed;
- :func:`plot_patches`: an image with its patch grid shaded by per-patch
  values, the true and the chosen patches outlined;
- :func:`plot_history`: ``loss_curve_`` by epoch with the switch between the
  training phases marked;
- :func:`plot_learning_curve`: a score (CRLR, accuracy, ...) against the
  training-set size, mean and spread over repetitions.
"""

import numpy as np

from .inspection import final_estimator

__all__ = ["plot_history", "plot_learning_curve", "plot_patches", "plot_tokens"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            'skdiagatt.plotting needs matplotlib (the "plot" extra): pip install -e ".[plot]" '
            "in a source checkout of skdiagatt, or pip install matplotlib"
        ) from None
    return plt


def _axes(ax, figsize=None):
    if ax is not None:
        return ax
    return _pyplot().subplots(figsize=figsize)[1]


# ------------------------------------------------------------------ tokens
def _shades(values, signed):
    """Values in [0, 1] for a colour map: min-max, or centred on 0 when signed."""
    v = np.asarray(values, dtype=np.float64)
    if signed:
        top = np.abs(v).max()
        return 0.5 + 0.5 * v / top if top > 0 else np.full_like(v, 0.5)
    lo, hi = v.min(), v.max()
    return (v - lo) / (hi - lo) if hi > lo else np.ones_like(v)


def _as_samples(tokens, values, selected, labels):
    """Lists of per-sample tokens, values (summed over heads), selections and headers."""
    one = len(tokens) == 0 or isinstance(tokens[0], str)
    if one:
        tokens, values = [tokens], [values]
        selected = None if selected is None else [selected]
        labels = None if labels is None else [labels]
    values = [np.asarray(v, dtype=np.float64) for v in values]
    values = [v.sum(axis=0) if v.ndim == 2 else v for v in values]
    for i, (t, v) in enumerate(zip(tokens, values)):
        if v.shape != (len(t),):
            raise ValueError(f"sample {i}: {len(t)} tokens but values of shape {v.shape}")
    selected = [()] * len(tokens) if selected is None else selected
    labels = [None] * len(tokens) if labels is None else labels
    return tokens, values, selected, labels


def _text_width(ax, fontsize):
    """``measure(text)``: the width in pixels that ``text`` takes on ``ax``."""
    renderer = ax.figure.canvas.get_renderer()

    def measure(text):
        probe = ax.text(0, 0, text, fontsize=fontsize)
        width = probe.get_window_extent(renderer).width
        probe.remove()
        return width

    return measure


def _layout(tokens, width, measure, space):
    """(x, line, text, index) of each token, wrapped at ``width`` pixels; returns them and the line count.

    WordPiece continuations (``##...``) are joined to the previous piece.
    """
    items, x, line = [], 0.0, 0
    for j, t in enumerate(tokens):
        piece = t[2:] if t.startswith("##") else t
        w = measure(piece)
        gap = 3.0 if t.startswith("##") else (0.0 if j == 0 else space)
        if x > 0 and x + gap + w > width:
            x, line, gap = 0.0, line + 1, 0.0
        items.append((x + gap, line, piece, j))
        x += gap + w
    return items, line + 1


def plot_tokens(tokens, values, selected=None, *, labels=None, signed=None, ax=None,
                fontsize=10, cmap=None):
    """Tokens shaded by a per-token value; the selected tokens boxed.

    Parameters
    ----------
    tokens : list of str, or list of such lists
        One text's tokens, or several texts (drawn one under the other).
    values : array-like of shape (p,) or (n_heads, p), or a list of them
        Per token: attention weights (``attention(X)[i]``, heads summed) or
        row contributions (``row_contributions(X)[i]``).
    selected : array-like of int, or a list of them, optional
        Token indices to box, e.g. ``localize(X)[i]``.
    labels : str or list of str, optional
        A header line above each text (its label, the prediction).
    signed : bool or None, default=None
        True: a diverging colour map centred on 0 (contributions); False:
        each text's minimum to maximum (weights).  None: True if any value
        is negative.
    ax : matplotlib Axes, optional
        Drawn on; None: a new figure sized to the texts.
    fontsize : float, default=10
    cmap : str or Colormap, optional
        Default ``"RdBu_r"`` when signed, else ``"Oranges"``.

    Returns
    -------
    ax : matplotlib Axes
        One text line per unit of its y axis, the header lines included.

    Examples
    --------
    >>> from skdiagatt.plotting import plot_tokens
    >>> ax = plot_tokens(["a", "fine", "film"], [0.1, 0.7, 0.2], selected=[1], labels="fresh")
    >>> [t.get_text() for t in ax.texts]
    ['fresh', 'a', 'fine', 'film']
    """
    plt = _pyplot()
    tokens, values, selected, labels = _as_samples(tokens, values, selected, labels)
    if signed is None:
        signed = any(np.any(v < 0) for v in values)
    cmap = plt.get_cmap(cmap or ("RdBu_r" if signed else "Oranges"))
    new = ax is None
    ax = _axes(ax, figsize=(10, 1))
    fig = ax.figure
    if new:
        ax.set_position([0.01, 0.0, 0.98, 1.0])
    measure = _text_width(ax, fontsize)
    width = ax.get_window_extent().width
    line = 0
    for toks, v, sel, label in zip(tokens, values, selected, labels):
        if label is not None:
            ax.text(4, line + 0.5, label, fontsize=0.8 * fontsize, color="0.35", va="center")
            line += 1
        shade, chosen = _shades(v, signed), set(np.ravel(sel).tolist())
        items, used = _layout(toks, width - 8, measure, measure("a a") - measure("aa"))
        for x, row, text, j in items:
            ax.text(4 + x, line + row + 0.5, text, fontsize=fontsize, va="center",
                    bbox=dict(boxstyle="square,pad=0.15", facecolor=cmap(0.9 * shade[j]),
                              edgecolor="black" if j in chosen else "none", linewidth=1.0))
        line += used + 1
    n_lines = line - 1
    if new:
        fig.set_size_inches(fig.get_size_inches()[0], 0.3 * n_lines + 0.2)
    ax.set_xlim(0, width)
    ax.set_ylim(n_lines, 0)
    ax.set_axis_off()
    return ax


# ----------------------------------------------------------------- patches
def _outline(ax, box, colour, style, out):
    from matplotlib.patches import Rectangle

    top, left, bottom, right = box
    ax.add_patch(Rectangle((left - 0.5 - out, top - 0.5 - out), right - left + 2 * out,
                           bottom - top + 2 * out, fill=False, edgecolor=colour,
                           linestyle=style, linewidth=2.0))


def plot_patches(image, grid, index, values=None, *, true_rows=None, chosen_rows=None, ax=None,
                 cmap="gray_r", values_cmap="Reds", alpha=0.5, vmin=None, vmax=None,
                 grid_lines=True):
    """An image with its patch grid, shaded by per-patch values; true and chosen patches outlined.

    Parameters
    ----------
    image : array-like of shape (H, W) or (H, W, C), or None
        The image ``index`` cut by :func:`~skdiagatt.images.image_to_patches`.
        None: draw ``values`` alone on the image plane.
    grid : PatchGrid
        From :func:`~skdiagatt.images.image_to_patches`.
    index : int
        Which image of ``grid``.
    values : array-like of shape (p,) or (n_heads, p), optional
        One value per patch (heads summed), e.g. ``attention(X)[index]``,
        shown over the image (opacity ``alpha``) or alone.
    true_rows, chosen_rows : array-like of int, optional
        Patches outlined green dashed (the truth, drawn one pixel larger so
        that both show where they coincide) and red (e.g. ``localize``).
    ax : matplotlib Axes, optional
    cmap : str, default="gray_r"
        Colour map of a single-channel image.
    values_cmap : str, default="Reds"
    alpha : float, default=0.5
        Opacity of ``values`` over the image.
    vmin, vmax : float, optional
        Range of ``values`` the colour map spans (default: their own range);
        ``0, 1`` compares attention weights across images.
    grid_lines : bool, default=True
        Draw the patch boundaries.

    Returns
    -------
    ax : matplotlib Axes
        In pixel coordinates of the image, its axis hidden.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.images import image_to_patches
    >>> from skdiagatt.plotting import plot_patches
    >>> image = np.random.RandomState(0).random_sample((8, 12))
    >>> X, grid = image_to_patches([image], 4)
    >>> ax = plot_patches(image, grid, 0, values=np.arange(6.0), true_rows=[5], chosen_rows=[4])
    >>> len(ax.patches), len(ax.images)
    (2, 2)
    """
    ax = _axes(ax)
    if image is not None:
        image = np.asarray(image)
        if image.shape != grid.shapes[index]:
            raise ValueError(f"image has shape {image.shape} but image {index} of the grid has "
                             f"{grid.shapes[index]}")
        ax.imshow(image, cmap=cmap if image.ndim == 2 else None, interpolation="nearest")
    if values is not None:
        values = np.asarray(values, dtype=np.float64)
        painted = grid.paint(index, values.sum(axis=0) if values.ndim == 2 else values)
        ax.imshow(painted, cmap=values_cmap, alpha=1.0 if image is None else alpha,
                  vmin=vmin, vmax=vmax, interpolation="nearest")
    if grid_lines:
        for top, left, bottom, right in grid.boxes(index):
            ax.plot([left - 0.5, right - 0.5, right - 0.5], [top - 0.5, top - 0.5, bottom - 0.5],
                    color="0.6", linewidth=0.5)
    for rows, colour, style, out in ((true_rows, "tab:green", "--", 1.0),
                                     (chosen_rows, "tab:red", "-", 0.0)):
        if rows is not None:
            for box in grid.boxes(index, rows):
                _outline(ax, box, colour, style, out)
    H, W = grid.shapes[index][:2]
    ax.set_xlim(-1.5, W + 0.5)
    ax.set_ylim(H + 0.5, -1.5)
    ax.set_axis_off()
    return ax


# ----------------------------------------------------------------- history
_PHASE_STYLE = {"main": ("tab:blue", "main phase"), "calibration": ("tab:orange", "calibration")}


def plot_history(model, *, ax=None, validation=True):
    """The training objective per epoch, each phase in its colour, the switches marked.

    The main phase (the latent-row objective by default) and the calibration
    phase minimise different objectives: the curve jumps where one ends, which
    is not a divergence.

    Parameters
    ----------
    model : fitted estimator, Pipeline or search
        Its final estimator has ``loss_curve_`` (and ``loss_curve_phase_``;
        without it every epoch counts as the main phase).
    ax : matplotlib Axes, optional
    validation : bool, default=True
        Also draw ``validation_scores_`` (dotted) when the fit recorded them.

    Returns
    -------
    ax : matplotlib Axes
        Epochs on the x axis, a dashed vertical line at each switch of phase.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt import DiagAttRegressor
    >>> from skdiagatt.plotting import plot_history
    >>> X = np.random.RandomState(0).normal(size=(40, 5, 3))
    >>> est = DiagAttRegressor(max_iter=3, calibration_iter=2).fit(X, X[:, 0, 0])
    >>> ax = plot_history(est)
    >>> [line.get_label() for line in ax.get_lines()][:2]
    ['main phase', 'calibration']
    """
    est, _ = final_estimator(model)
    curve = getattr(est, "loss_curve_", None)
    if curve is None:
        raise TypeError(f"{type(est).__name__} has no loss_curve_: fit a trained estimator first")
    phases = list(getattr(est, "loss_curve_phase_", ["main"] * len(curve)))
    scores = getattr(est, "validation_scores_", None) if validation else None
    ax = _axes(ax)
    epochs = np.arange(1, len(curve) + 1)
    starts = [0] + [k for k in range(1, len(phases)) if phases[k] != phases[k - 1]]
    labelled = set()
    for a, b in zip(starts, starts[1:] + [len(phases)]):
        colour, name = _PHASE_STYLE.get(phases[a], ("0.3", phases[a]))
        label = None if name in labelled else name
        labelled.add(name)
        ax.plot(epochs[a:b], curve[a:b], "o-", color=colour, markersize=3, label=label)
        if scores is not None and len(scores) == len(curve):
            ax.plot(epochs[a:b], scores[a:b], ":", color=colour,
                    label=None if f"{name} (validation)" in labelled else f"{name} (validation)")
            labelled.add(f"{name} (validation)")
        if a > 0:
            ax.axvline(a + 0.5, color="0.5", linestyle="--", linewidth=1.0)
    ax.set_xlabel("epoch")
    ax.set_ylabel("training objective")
    ax.legend(fontsize=8)
    return ax


# ---------------------------------------------------------- learning curve
def plot_learning_curve(sizes, scores, *, label=None, references=None, ax=None,
                        ylabel="CRLR", xscale="log"):
    """A score against the training-set size: the mean over repetitions and +/- one sd.

    Call it once per method on the same ``ax`` to compare methods.  The
    output of :func:`sklearn.model_selection.learning_curve` fits as it is
    (``train_sizes``, and ``test_scores`` with one column per fold).

    Parameters
    ----------
    sizes : array-like of shape (n_sizes,)
        Training-set sizes.
    scores : array-like of shape (n_sizes,) or (n_sizes, n_repeats)
        The score (CRLR, accuracy, R^2, ...) of each repetition at each size.
    label : str, optional
        Legend entry of this curve.
    references : dict of str to float, optional
        Horizontal reference lines, e.g. ``{"chance": 0.1, "Bayes": 0.93}``.
    ax : matplotlib Axes, optional
    ylabel : str, default="CRLR"
    xscale : str, default="log"

    Returns
    -------
    ax : matplotlib Axes
        With a legend when ``label`` is given.

    Examples
    --------
    >>> from skdiagatt.plotting import plot_learning_curve
    >>> ax = plot_learning_curve([100, 300, 1000], [[0.3, 0.4], [0.6, 0.7], [0.9, 0.9]],
    ...                          label="DiagAtt", references={"chance": 0.1})
    >>> ax.get_lines()[0].get_ydata().round(3).tolist()
    [0.35, 0.65, 0.9]
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    scores = scores[:, None] if scores.ndim == 1 else scores
    if scores.ndim != 2 or scores.shape[0] != sizes.shape[0]:
        raise ValueError(f"scores must have one row per size ({sizes.shape[0]}), "
                         f"got shape {scores.shape}")
    ax = _axes(ax)
    mean = scores.mean(axis=1)
    (line,) = ax.plot(sizes, mean, "o-", label=label)
    if scores.shape[1] > 1:
        sd = scores.std(axis=1, ddof=1)
        ax.fill_between(sizes, mean - sd, mean + sd, color=line.get_color(), alpha=0.2)
    for name, value in (references or {}).items():
        ax.axhline(value, color="0.5", linestyle=":", linewidth=1.0)
        ax.annotate(name, (0.01, value), xycoords=("axes fraction", "data"), fontsize=8,
                    color="0.35", va="bottom")
    ax.set_xscale(xscale)
    ax.set_xlabel("training samples")
    ax.set_ylabel(ylabel)
    if label is not None:
        ax.legend(fontsize=8)
    return ax
