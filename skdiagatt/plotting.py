"""Pictures of what a model localized and how it trained (needs matplotlib).

Every function draws on ``ax`` (a new figure's axes when None) and returns it.
matplotlib is imported only when a function is called: the ``plot`` extra,
``pip install -e ".[plot]"`` in a source checkout (or ``pip install matplotlib``).

- :func:`plot_tokens`: a text's tokens shaded by attention weight or row
  contribution, the selected tokens boxed, a colour bar and a legend under them;
- :func:`plot_patches`: an image with each patch framed in the colour of its
  value (a colour bar beside it), the true and the chosen patches outlined
  and named in a legend;
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


# The part of the colour map the shades span: light enough for dark text, and
# symmetric about the centre when signed, so that zero keeps the centre colour.
_SHADE_RANGE = {False: (0.0, 0.6), True: (0.15, 0.85)}
_KEY_LINES = 2  # text lines kept under the texts for the colour bar and the legend


def _ink(colour):
    """Black text on a light shade, white on a dark one (a user's colour map)."""
    r, g, b = colour[:3]
    return "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.45 else "black"


def _draw_texts(ax, tokens, values, selected, labels, signed, shade_of, fontsize):
    """Every text under its header, wrapped to ``ax``; returns the number of lines used."""
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
            face = shade_of(shade[j])
            ax.text(4 + x, line + row + 0.5, text, fontsize=fontsize, va="center", color=_ink(face),
                    bbox=dict(boxstyle="square,pad=0.15", facecolor=face,
                              edgecolor="black" if j in chosen else "none", linewidth=1.2))
        line += used + 1
    ax.set_xlim(0, width)
    return line - 1


def _token_key(ax, n_lines, cmap, lo, hi, signed, label, selected_label, fontsize):
    """A colour bar of the shades, and a legend of the box, in the key lines under the texts."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    part = _KEY_LINES / (n_lines + _KEY_LINES)  # of the axes height
    cax = ax.inset_axes([0.62, 0.5 * part, 0.3, 0.2 * part])
    shown = ListedColormap(cmap(np.linspace(lo, hi, 256)))
    bar = ax.figure.colorbar(ScalarMappable(cmap=shown), cax=cax, orientation="horizontal")
    # The shades are scaled per text, so the bar's ends are each text's own extremes.
    ticks, names = ([0, 0.5, 1], ["most negative", "0", "most positive"]) if signed else \
        ([0, 1], ["lowest", "highest"])
    bar.set_ticks(ticks, labels=names, fontsize=0.8 * fontsize)
    cax.set_ylabel(f"shade: {label}\n(per text)", rotation=0, ha="right", va="center",
                   fontsize=0.8 * fontsize)
    if selected_label:
        box = Patch(facecolor="white", edgecolor="black", linewidth=1.2, label=selected_label)
        ax.legend(handles=[box], loc="center left", bbox_to_anchor=(0.0, 0.5 * part),
                  frameon=False, fontsize=0.8 * fontsize)
    return bar


def plot_tokens(tokens, values, selected=None, *, labels=None, signed=None, ax=None,
                fontsize=10, cmap=None, key=True, values_label=None,
                selected_label="selected token"):
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
        Default ``"RdBu_r"`` when signed, else ``"Oranges"``; only its light
        part is used, under black text (white text on a dark shade).
    key : bool, default=True
        Under the texts, a colour bar of the shades labelled ``values_label``
        and, when tokens are selected, a legend of the box.
    values_label : str, optional
        Default "contribution" when signed, else "attention weight".
    selected_label : str, default="selected token"
        The legend entry of the box.

    Returns
    -------
    ax : matplotlib Axes
        One text line per unit of its y axis, the header and key lines included.

    Examples
    --------
    >>> from skdiagatt.plotting import plot_tokens
    >>> ax = plot_tokens(["a", "fine", "film"], [0.1, 0.7, 0.2], selected=[1], labels="fresh")
    >>> [t.get_text() for t in ax.texts]
    ['fresh', 'a', 'fine', 'film']
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['selected token']
    """
    plt = _pyplot()
    tokens, values, selected, labels = _as_samples(tokens, values, selected, labels)
    if signed is None:
        signed = any(np.any(v < 0) for v in values)
    cmap = plt.get_cmap(cmap or ("RdBu_r" if signed else "Oranges"))
    lo, hi = _SHADE_RANGE[bool(signed)]
    new = ax is None
    ax = _axes(ax, figsize=(10, 1))
    if new:
        ax.set_position([0.01, 0.0, 0.98, 1.0])
    n_lines = _draw_texts(ax, tokens, values, selected, labels, signed,
                          lambda s: cmap(lo + (hi - lo) * s), fontsize)
    total = n_lines + (_KEY_LINES if key else 0)
    if new:
        ax.figure.set_size_inches(ax.figure.get_size_inches()[0], 0.3 * total + 0.2)
    ax.set_ylim(total, 0)
    ax.set_axis_off()
    if key:
        any_selected = any(np.size(s) for s in selected)
        _token_key(ax, n_lines, cmap, lo, hi, signed,
                   values_label or ("contribution" if signed else "attention weight"),
                   selected_label if any_selected else None, fontsize)
    return ax


# ----------------------------------------------------------------- patches
# (rows argument, colour, line style, drawn this many pixels outside the box, legend entry):
# the truth one pixel larger, so that both outlines show where they coincide.
_MARKS = (("true_rows", "tab:green", "--", 1.0, "true patch"),
          ("chosen_rows", "tab:red", "-", 0.0, "localized patch"))


def _outline(ax, box, colour, style, out, label="_nolegend_"):
    from matplotlib.patches import Rectangle

    top, left, bottom, right = box
    ax.add_patch(Rectangle((left - 0.5 - out, top - 0.5 - out), right - left + 2 * out,
                           bottom - top + 2 * out, fill=False, edgecolor=colour,
                           linestyle=style, linewidth=2.0, label=label))


def _frames(ax, grid, index, values, cmap, norm, alpha):
    """A ring inside each patch's border, in the colour of its value (opacity ``alpha``).

    A ring rather than a fill, so that the pixels of the patch stay visible;
    its width is a tenth of the patch, so that it scales with the picture, and
    it keeps clear of the border, where the true and chosen outlines go.
    """
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path

    gap, width = 0.05 * min(grid.patch_size), 0.1 * min(grid.patch_size)

    def ring(top, left, bottom, right):
        # The inner square runs the other way round, which makes it a hole.
        out, inn = _corners(top, left, bottom, right, gap), _corners(top, left, bottom, right, gap + width)
        codes = [Path.MOVETO] + [Path.LINETO] * 3 + [Path.CLOSEPOLY]
        return PathPatch(Path(out + [out[0]] + inn[::-1] + [inn[-1]], codes + codes))

    colours = cmap(norm(values))
    colours[:, 3] = alpha
    ax.add_collection(PatchCollection([ring(*box) for box in grid.boxes(index)],
                                      facecolors=colours, edgecolors="none"))


def _corners(top, left, bottom, right, inset):
    """The corners of a patch's pixel box shrunk by ``inset`` pixels, counterclockwise on screen."""
    x0, y0 = left - 0.5 + inset, top - 0.5 + inset
    x1, y1 = right - 0.5 - inset, bottom - 0.5 - inset
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def _draw_values(ax, grid, index, values, over_image, overlay, cmap, norm, alpha):
    if over_image and overlay == "frame":
        _frames(ax, grid, index, values, cmap, norm, 1.0 if alpha is None else alpha)
    else:
        opacity = 1.0 if not over_image else (0.5 if alpha is None else alpha)
        ax.imshow(grid.paint(index, values), cmap=cmap, norm=norm, alpha=opacity,
                  interpolation="nearest")


def _colorbar(ax, where, cmap, norm, label):
    from matplotlib.cm import ScalarMappable

    bar = ax.figure.colorbar(ScalarMappable(norm=norm, cmap=cmap),
                             ax=ax if where is True else where, shrink=0.8)
    bar.set_label(label)
    return bar


def plot_patches(image, grid, index, values=None, *, true_rows=None, chosen_rows=None, ax=None,
                 cmap="gray_r", values_cmap="Blues", alpha=None, vmin=None, vmax=None,
                 grid_lines=True, overlay="frame", colorbar=True, values_label="attention weight",
                 legend=True):
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
        One value per patch (heads summed), e.g. ``attention(X)[index]``:
        over the image as drawn by ``overlay``, alone as a filled map.
    true_rows, chosen_rows : array-like of int, optional
        Patches outlined green dashed (the truth, drawn one pixel larger so
        that both show where they coincide) and red (e.g. ``localize``);
        legend entries "true patch" and "localized patch".
    ax : matplotlib Axes, optional
    cmap : str, default="gray_r"
        Colour map of a single-channel image.
    values_cmap : str, default="Blues"
        Colour map of ``values``; apart from the red and green outlines.
    alpha : float, optional
        Opacity of ``values`` over the image: default 1.0 for the frames of
        ``overlay="frame"``, 0.5 for ``overlay="fill"``.
    vmin, vmax : float, optional
        Range of ``values`` the colour map spans (default: their own range);
        ``0, 1`` compares attention weights across images.
    grid_lines : bool, default=True
        Draw the patch boundaries.
    overlay : {"frame", "fill"}, default="frame"
        How ``values`` go over an image: "frame" draws a ring just inside
        each patch's border in its value's colour, the pixels inside left as
        they are; "fill" covers the image with the value map at opacity
        ``alpha``.
    colorbar : bool or Axes or list of Axes, default=True
        A colour bar of ``values``, labelled ``values_label``, beside ``ax``;
        given axes: one bar beside all of them (panels sharing ``vmin``,
        ``vmax``).  False: none.
    values_label : str, default="attention weight"
    legend : bool, default=True
        A legend of the outlines under the image, when there are any.

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
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['true patch', 'localized patch']
    """
    if overlay not in ("frame", "fill"):
        raise ValueError(f'overlay must be "frame" or "fill", got {overlay!r}')
    plt = _pyplot()
    ax = _axes(ax)
    if image is not None:
        image = np.asarray(image)
        if image.shape != grid.shapes[index]:
            raise ValueError(f"image has shape {image.shape} but image {index} of the grid has "
                             f"{grid.shapes[index]}")
        ax.imshow(image, cmap=cmap if image.ndim == 2 else None, interpolation="nearest")
    if values is not None:
        values = np.asarray(values, dtype=np.float64)
        values = values.sum(axis=0) if values.ndim == 2 else values
        norm = plt.Normalize(vmin, vmax)
        norm.autoscale_None(values)  # the limits not given: the values' own range
        values_cmap = plt.get_cmap(values_cmap)
        _draw_values(ax, grid, index, values, image is not None, overlay, values_cmap, norm, alpha)
        if colorbar is not False:
            _colorbar(ax, colorbar, values_cmap, norm, values_label)
    if grid_lines:
        for top, left, bottom, right in grid.boxes(index):
            ax.plot([left - 0.5, right - 0.5, right - 0.5], [top - 0.5, top - 0.5, bottom - 0.5],
                    color="0.6", linewidth=0.5)
    for name, colour, style, out, label in _MARKS:
        rows = true_rows if name == "true_rows" else chosen_rows
        if rows is not None:
            for k, box in enumerate(grid.boxes(index, rows)):
                _outline(ax, box, colour, style, out, label if k == 0 else "_nolegend_")
    if legend and ax.patches:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=2, fontsize=8,
                  frameon=False, handlelength=1.5, columnspacing=1.0)
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
