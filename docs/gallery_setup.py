"""The gallery's order and the arguments its runs get (named in conf.py by string).

Sphinx >= 7.3 caches the configuration, so sphinx-gallery takes its sort key
and its ``reset_argv`` as importable names rather than objects.
"""

from pathlib import Path

# From the first fit on one's own matrices to the flagship studies; the
# examples that need more than one process come last.
ORDER = [
    "plot_your_own_matrices.py",
    "plot_image_patches.py",
    "plot_training_progress.py",
    "plot_cluttered_digits.py",
    "plot_sentiment.py",
    "fit_npy_shards.py",
    "fit_across_processes.py",
]

# The studies take minutes at their defaults; the gallery runs their small
# version, which still prints the table and draws the picture.
ARGV = {"plot_cluttered_digits.py": ["--gallery"], "plot_sentiment.py": ["--gallery"]}


class GalleryOrder:
    """Sort key of the examples: their place in ``ORDER``, then their name."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __repr__(self):
        return "GalleryOrder"

    def __call__(self, filename):
        name = Path(filename).name
        return (ORDER.index(name) if name in ORDER else len(ORDER), name)


def gallery_argv(gallery_conf, script_vars):
    """``sys.argv[1:]`` of an example run by the gallery."""
    return ARGV.get(Path(script_vars["src_file"]).name, [])
