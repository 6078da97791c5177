"""
Images: which patch decided?
============================

Images become samples of patch rows with
:func:`skdiagatt.images.image_to_patches`; a classifier in a pipeline is
then asked both for the label and for the patch that decided it.

The images here are 12 x 12 noise with a bar in one 4 x 4 patch: a
horizontal bar is class 1, a vertical bar class 0.  The bar's patch is
known, so the localization can be checked.
"""

# %%
# A 3-D array of images
# ---------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline

import skdiagatt
from skdiagatt.images import image_to_patches
from skdiagatt.plotting import plot_patches

rng = np.random.RandomState(0)
n = 300
images = 0.4 * rng.random_sample((n, 12, 12))
labels, where = rng.randint(2, size=n), rng.randint(9, size=n)
for image, label, j in zip(images, labels, where):
    r, c = 4 * (j // 3), 4 * (j % 3)
    (image[r + 1 : r + 3, c : c + 4] if label else image[r : r + 4, c + 1 : c + 3])[:] = 1.0

# %%
# Patches, a pipeline, and localization through it
# ------------------------------------------------
# 9 patches of 4 x 4 pixels: each image is a (9, 16) sample.  The grid maps
# a row back to its pixels.
X, grid = image_to_patches(images, 4)
pipe = make_pipeline(skdiagatt.RowStandardScaler(),
                     skdiagatt.DiagAttClassifier(random_state=0))
pipe.fit(X[:200], labels[:200])
print(f"test accuracy: {pipe.score(X[200:], labels[200:]):.3f}")
found = skdiagatt.localize(pipe, X[200:])  # through the scaler to the classifier
print(f"bar patch found in {np.mean([f[0] == w for f, w in zip(found, where[200:])]):.0%} of the test images")

# %%
# The patch that decided
# ----------------------
# Frame colour: the attention weight of each patch (one colour bar for all
# panels, 0 to 1); green dashed: the bar's patch; red: the localized one.
weights = skdiagatt.attention(pipe, X[200:208])
fig, axes = plt.subplots(2, 4, figsize=(9, 4.8), layout="constrained")
for k, ax in enumerate(axes.ravel()):
    plot_patches(images[200 + k], grid, 200 + k, values=weights[k], true_rows=[where[200 + k]],
                 chosen_rows=found[k], ax=ax, vmin=0, vmax=1, legend=False,
                 colorbar=list(axes.ravel()) if k == 7 else False)
    ax.set_title(f"class {labels[200 + k]}", fontsize=10)
fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=2)
plt.show()
